//! Telemetry that signed-in agents post (Claude Code sends its OTLP metrics, logs and traces to
//! the gateway it signed in to): each export is tagged with the account (`enduser.id` = its
//! email, replacing any the client set) and forwarded to `[telemetry] otlp_endpoint`, or dropped
//! when none is configured (issue 40).
//!
//! The body is decoded with the OpenTelemetry protocol's own types (protobuf) or walked as JSON
//! (OTLP/JSON), only the resources' attributes change, and it is sent on in the encoding it came
//! in. Forwarding happens off the request: the agent gets its 200 at once, and at most
//! `IN_FLIGHT` exports wait on a slow collector (more are dropped and logged).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde_json::{Value, json};

/// The attribute that names the account.
pub const ENDUSER: &str = "enduser.id";

/// Exports waiting on the collector at most.
const IN_FLIGHT: usize = 64;

/// The three OTLP signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Metrics,
    Logs,
    Traces,
}

impl Signal {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Metrics => "metrics",
            Self::Logs => "logs",
            Self::Traces => "traces",
        }
    }

    /// The JSON member that holds the export's resources.
    const fn json_key(self) -> &'static str {
        match self {
            Self::Metrics => "resourceMetrics",
            Self::Logs => "resourceLogs",
            Self::Traces => "resourceSpans",
        }
    }
}

/// How an export is encoded, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    pub fn of(content_type: Option<&str>) -> Option<Self> {
        let essence = content_type?.split(';').next()?.trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Self::Protobuf),
            "application/json" => Some(Self::Json),
            _ => None,
        }
    }

    const fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// Sets `enduser.id` on every resource of `resources` (adding a resource where there is none).
fn tag_resources<'a>(resources: impl Iterator<Item = &'a mut Option<Resource>>, email: &str) {
    for resource in resources {
        let resource = resource.get_or_insert_with(Resource::default);
        resource.attributes.retain(|kv| kv.key != ENDUSER);
        resource.attributes.push(KeyValue {
            key: ENDUSER.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(email.to_owned())),
            }),
            ..KeyValue::default()
        });
    }
}

/// The export with every resource naming `email` as its `enduser.id`, in the same encoding;
/// `None` when the body is not a valid export of `signal`.
pub fn tag(signal: Signal, encoding: Encoding, body: &[u8], email: &str) -> Option<Vec<u8>> {
    match encoding {
        Encoding::Protobuf => match signal {
            Signal::Metrics => {
                let mut req = ExportMetricsServiceRequest::decode(body).ok()?;
                tag_resources(
                    req.resource_metrics.iter_mut().map(|r| &mut r.resource),
                    email,
                );
                Some(req.encode_to_vec())
            }
            Signal::Logs => {
                let mut req = ExportLogsServiceRequest::decode(body).ok()?;
                tag_resources(req.resource_logs.iter_mut().map(|r| &mut r.resource), email);
                Some(req.encode_to_vec())
            }
            Signal::Traces => {
                let mut req = ExportTraceServiceRequest::decode(body).ok()?;
                tag_resources(
                    req.resource_spans.iter_mut().map(|r| &mut r.resource),
                    email,
                );
                Some(req.encode_to_vec())
            }
        },
        Encoding::Json => {
            let mut export: Value = serde_json::from_slice(body).ok()?;
            let resources = export
                .as_object_mut()?
                .entry(signal.json_key())
                .or_insert_with(|| json!([]))
                .as_array_mut()?;
            for entry in resources {
                let entry = entry.as_object_mut()?;
                let resource = entry
                    .entry("resource")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()?;
                let attributes = resource
                    .entry("attributes")
                    .or_insert_with(|| json!([]))
                    .as_array_mut()?;
                attributes.retain(|kv| kv.get("key").and_then(Value::as_str) != Some(ENDUSER));
                attributes.push(json!({"key": ENDUSER, "value": {"stringValue": email}}));
            }
            serde_json::to_vec(&export).ok()
        }
    }
}

/// Where exports go, shared by every request.
#[derive(Clone)]
pub struct Forwarder {
    /// `[telemetry] otlp_endpoint` without a trailing slash; `None` drops every export.
    endpoint: Option<String>,
    client: reqwest::Client,
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl Forwarder {
    pub fn new(endpoint: Option<&str>) -> anyhow::Result<Self> {
        Ok(Self {
            endpoint: endpoint.map(|e| e.trim_end_matches('/').to_owned()),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()?,
            in_flight: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
        })
    }

    /// Whether exports are forwarded at all.
    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
    }

    /// Sends `body` (already tagged) to the collector's path for `signal`, in the background.
    pub fn send(&self, signal: Signal, encoding: Encoding, body: Vec<u8>) {
        let Some(endpoint) = &self.endpoint else {
            return;
        };
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            tracing::warn!(
                signal = signal.as_str(),
                "the OTLP collector is behind: an agent's export was dropped"
            );
            return;
        };
        let url = format!("{endpoint}/v1/{}", signal.as_str());
        let request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, encoding.content_type())
            .body(body);
        tokio::spawn(async move {
            match request.send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => {
                    tracing::warn!(
                        signal = signal.as_str(),
                        status = r.status().as_u16(),
                        "the OTLP collector refused an agent's export"
                    );
                }
                Err(e) => {
                    tracing::warn!(signal = signal.as_str(), error = %e, "could not forward an agent's export to the OTLP collector");
                }
            }
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::metrics::v1::ResourceMetrics;

    fn attrs(resource: &Resource) -> Vec<(String, String)> {
        resource
            .attributes
            .iter()
            .map(|kv| {
                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    _ => String::new(),
                };
                (kv.key.clone(), v)
            })
            .collect()
    }

    #[test]
    fn protobuf_exports_name_the_account_and_lose_a_forged_one() {
        let forged = KeyValue {
            key: ENDUSER.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue("boss@example.com".into())),
            }),
            ..KeyValue::default()
        };
        let req = ExportMetricsServiceRequest {
            resource_metrics: vec![
                ResourceMetrics {
                    resource: Some(Resource {
                        attributes: vec![forged],
                        ..Resource::default()
                    }),
                    ..ResourceMetrics::default()
                },
                ResourceMetrics::default(),
            ],
        };
        let tagged = tag(
            Signal::Metrics,
            Encoding::Protobuf,
            &req.encode_to_vec(),
            "ada@example.com",
        )
        .unwrap();
        let back = ExportMetricsServiceRequest::decode(tagged.as_slice()).unwrap();
        for rm in &back.resource_metrics {
            assert_eq!(
                attrs(rm.resource.as_ref().unwrap()),
                [(ENDUSER.to_owned(), "ada@example.com".to_owned())]
            );
        }
        assert!(tag(Signal::Metrics, Encoding::Protobuf, b"\xff\xff\xff", "a").is_none());
    }

    #[test]
    fn json_exports_name_the_account() {
        let body = json!({"resourceLogs": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "claude-code"}},
            {"key": ENDUSER, "value": {"stringValue": "boss@example.com"}}]}, "scopeLogs": []}]});
        let tagged = tag(
            Signal::Logs,
            Encoding::Json,
            &serde_json::to_vec(&body).unwrap(),
            "ada@example.com",
        )
        .unwrap();
        let back: Value = serde_json::from_slice(&tagged).unwrap();
        let attributes = &back["resourceLogs"][0]["resource"]["attributes"];
        assert_eq!(attributes.as_array().unwrap().len(), 2);
        assert_eq!(attributes[0]["key"], "service.name");
        assert_eq!(attributes[1]["value"]["stringValue"], "ada@example.com");
        assert!(tag(Signal::Logs, Encoding::Json, b"[1]", "a").is_none());
    }
}
