//! Traces over OTLP: the exporter and tracing layer (settings: `config::TelemetryConfig`), and W3C
//! trace context taken from callers and handed on to providers.
//!
//! Spans are the `tracing` spans the service already opens; `tracing-opentelemetry` turns them into
//! OpenTelemetry spans, and a batch processor on the tokio runtime exports them over OTLP/HTTP
//! (protobuf), so a request never waits on the collector. No global tracer or propagator is set:
//! the layer carries its own tracer and the propagator is a value.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::TelemetryConfig;

/// How long one export may take before it is abandoned (the spans in it are dropped, not retried).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// `http://host:4318` (with or without a trailing slash) to its traces URL.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// The running exporter; `shutdown` (or dropping it at exit) sends what is still queued.
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Exports everything recorded so far, waiting for the collector's answer.
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!(error = %e, "could not export the last spans");
        }
    }

    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "could not shut the span exporter down");
        }
    }
}

/// The OTLP exporter and the layer that feeds it, or `None` without an endpoint. Must be called
/// inside a tokio runtime (the batch processor runs on it).
pub fn layer<S>(
    config: &TelemetryConfig,
) -> anyhow::Result<
    Option<(
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
        Tracing,
    )>,
>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let Some(endpoint) = config.otlp_endpoint.as_deref() else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint))
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| anyhow::anyhow!("telemetry.otlp_endpoint: cannot build the exporter: {e}"))?;
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("relay");
    let layer = tracing_opentelemetry::layer().with_tracer(tracer);
    Ok(Some((layer, Tracing { provider })))
}

/// Continues the caller's trace: the `traceparent` (and `tracestate`) of `headers` become the
/// parent of `span`. Without an OpenTelemetry layer this does nothing.
pub fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    // Fails only when the span is already started elsewhere, which a fresh request span is not.
    let _ = span.set_parent(cx);
}

/// Renames a started span (the request span learns its route only after routing).
pub fn rename(span: &tracing::Span, name: String) {
    use opentelemetry::trace::TraceContextExt;
    span.context().span().update_name(name);
}

/// The W3C trace context headers of the current span, to send on to a provider.
pub fn outgoing_headers() -> Vec<(HeaderName, HeaderValue)> {
    let cx = tracing::Span::current().context();
    let mut headers = Vec::new();
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(&mut headers));
    headers
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeaderInjector<'a>(&'a mut Vec<(HeaderName, HeaderValue)>);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.push((name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_path_is_appended_once() {
        assert_eq!(
            traces_url("http://c:4318"),
            "http://c:4318/v1/traces".to_owned()
        );
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
