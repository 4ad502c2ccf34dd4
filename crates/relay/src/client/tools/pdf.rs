//! create_pdf (rule 5): the best local engine found on `PATH`, tried in order (pandoc with a PDF
//! engine, wkhtmltopdf, a headless Chromium), and when none is there or all fail, the built-in
//! renderer in `pdf_builtin`, so a PDF is always produced. The result names the engine that made it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::pdf_builtin::{Block, blocks, render};
use super::{opt_str, safe_fs, str_arg};
use crate::client::project::Project;

/// The first executable called `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

async fn try_engine(program: &Path, args: &[String], output: &Path) -> bool {
    let _ = std::fs::remove_file(output);
    let run = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    let ok = matches!(
        tokio::time::timeout(Duration::from_secs(90), run).await,
        Ok(Ok(s)) if s.success()
    );
    ok && std::fs::read(output).is_ok_and(|b| b.starts_with(b"%PDF"))
}

pub async fn create_pdf(project: &Project, args: &Value) -> anyhow::Result<String> {
    let content = str_arg(args, "content")?;
    let out_arg = str_arg(args, "output_path")?;
    let title = opt_str(args, "title").unwrap_or("");
    let target = project.resolve(out_arg)?;
    let parsed = blocks(content);
    let work = tempfile_dir()?;
    let made = engines(&work, content, title, &parsed).await;
    let _ = std::fs::remove_dir_all(&work);
    let (bytes, engine) = match made? {
        Some(made) => made,
        None => (render(title, &parsed), "the built-in renderer".to_owned()),
    };
    // The engines wrote in the scratch directory; only relay writes into the project, and never
    // through a symlink.
    safe_fs::write_confined(project, &target, &bytes, out_arg)?;
    Ok(format!("wrote {} with {engine}", project.relative(&target)))
}

/// The PDF from the first local engine that makes one, with the engine's name; `None` when none
/// is installed or all failed.
async fn engines(
    work: &Path,
    content: &str,
    title: &str,
    parsed: &[Block],
) -> anyhow::Result<Option<(Vec<u8>, String)>> {
    let md = work.join("input.md");
    let html = work.join("input.html");
    let output = work.join("output.pdf");
    std::fs::write(&md, content)?;
    std::fs::write(&html, to_html(title, parsed))?;
    let out = output.display().to_string();

    let mut engine = None;
    if let Some(pandoc) = which("pandoc") {
        for pdf_engine in ["wkhtmltopdf", "weasyprint", "xelatex", "pdflatex"] {
            if which(pdf_engine).is_none() {
                continue;
            }
            let mut a = vec![
                md.display().to_string(),
                "-o".into(),
                out.clone(),
                format!("--pdf-engine={pdf_engine}"),
            ];
            if !title.is_empty() {
                a.extend(["--metadata".into(), format!("title={title}")]);
            }
            if try_engine(&pandoc, &a, &output).await {
                engine = Some(format!("pandoc with {pdf_engine}"));
                break;
            }
        }
    }
    if engine.is_none()
        && let Some(w) = which("wkhtmltopdf")
    {
        let a = vec!["--quiet".into(), html.display().to_string(), out.clone()];
        if try_engine(&w, &a, &output).await {
            engine = Some("wkhtmltopdf".to_owned());
        }
    }
    if engine.is_none() {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let Some(c) = which(name) else { continue };
            let a = vec![
                "--headless".into(),
                "--no-sandbox".into(),
                "--disable-gpu".into(),
                "--no-pdf-header-footer".into(),
                format!("--print-to-pdf={out}"),
                format!("file://{}", html.display()),
            ];
            if try_engine(&c, &a, &output).await {
                engine = Some(format!("headless {name}"));
                break;
            }
        }
    }
    Ok(match engine {
        Some(e) => Some((std::fs::read(&output)?, e)),
        None => None,
    })
}

/// A scratch directory for the engines, outside the project so nothing is left behind in it;
/// made new and private (0700), never one that already exists (which another user could own).
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..16u32 {
        let dir = std::env::temp_dir().join(format!(
            "relay-pdf-{}-{nanos}-{attempt}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(e),
        }
    }
    Err(anyhow::anyhow!(
        "cannot make a scratch directory for the PDF engines: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The same blocks the built-in renderer draws, as a plain HTML page for the HTML engines.
fn to_html(title: &str, blocks: &[Block]) -> String {
    let mut body = String::new();
    if !title.is_empty() {
        body.push_str(&format!("<h1>{}</h1>\n", escape(title)));
    }
    let mut in_list = false;
    for b in blocks {
        let is_item = matches!(b, Block::Item(_));
        if in_list && !is_item {
            body.push_str("</ul>\n");
        }
        if is_item && !in_list {
            body.push_str("<ul>\n");
        }
        in_list = is_item;
        match b {
            Block::Heading(level, t) => {
                body.push_str(&format!("<h{level}>{}</h{level}>\n", escape(t)))
            }
            Block::Para(t) => body.push_str(&format!("<p>{}</p>\n", escape(t))),
            Block::Item(t) => body.push_str(&format!("<li>{}</li>\n", escape(t))),
            Block::Code(lines) => body.push_str(&format!(
                "<pre><code>{}</code></pre>\n",
                escape(&lines.join("\n"))
            )),
        }
    }
    if in_list {
        body.push_str("</ul>\n");
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f4f4f4;padding:.5em}}</style>\
         </head><body>\n{body}</body></html>\n",
        escape(title)
    )
}
