//! The status page served at `GET /`: one HTML document with its stylesheet and script inlined, all
//! embedded in the binary (`page.html`, `page.css`, `page.js` beside this file), so it loads nothing
//! from any other host and works offline.
//!
//! The page holds no data. Its script reads `GET /v1/models` (top weights, names, version) and
//! `GET /v1/history` (the scalars of the last snapshots), and asks again every `snapshot.interval_ms`,
//! fetching only points newer than the ones it has (`since`). It draws each chart as plain SVG. With
//! tokens configured those two routes need a `read` token: on a 401 the page asks for one, keeps it in
//! `sessionStorage` (gone when the tab closes) and sends it as `Authorization: Bearer`, never in a URL.
//!
//! The response's Content-Security-Policy allows the inline script and style, requests to this origin
//! only, and no form submission (the token field is read by the script, never submitted).

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};

const HTML: &str = include_str!("page.html");
const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// What the page may load and send: this origin only; no frames, forms, plugins or base URL changes.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The page with its stylesheet and script inlined, assembled once.
pub fn document() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| {
        HTML.replace("/*{{STYLE}}*/", CSS)
            .replace("/*{{SCRIPT}}*/", JS)
    })
}

/// The page's schema in the OpenAPI document: HTML text.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String)]
#[allow(dead_code)] // a schema, built by the derive only
pub struct Html(String);

/// The status page: live charts of every learner (open even with tokens: it holds no data).
#[utoipa::path(get, path = "/", tag = "status",
    responses((status = 200, description = "The status page (HTML; its data comes from /v1/models and /v1/history)",
        body = Html, content_type = "text/html")),
    security(()),
)]
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        document(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_inlines_its_style_and_script_and_names_no_other_host() {
        let page = document();
        assert!(!page.contains("{{STYLE}}") && !page.contains("{{SCRIPT}}"));
        assert!(page.contains(CSS.trim()) && page.contains(JS.trim()));
        // The SVG namespace is a name, not an address the page loads.
        let page = page.replace("\"http://www.w3.org/2000/svg\"", "");
        for external in [
            "http:", "https:", "//cdn", "src=", "href=", "@import", "url(",
        ] {
            assert!(!page.contains(external), "{external}");
        }
    }
}
