//! A browser's requests to the approval page, written by hand: the forms it
//! posts, with the origin and the cookie a browser sends, and the page it
//! reads back.

use std::time::Duration;

/// A client that follows no redirect, as a test of a page's answers
/// needs (a `303` is what it checks).
pub fn page_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A form body, every byte but letters and digits percent-encoded.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Posts `fields` as a form to `url` as a page of `origin` does, with the
/// session `cookie` if the browser holds one.
pub async fn post_form(
    http: &reqwest::Client,
    url: &str,
    origin: &str,
    cookie: Option<&str>,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .header("origin", origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(fields));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    request.send().await.unwrap()
}

/// The page at `base` as a browser holding `cookie` sees it.
pub async fn page_text(http: &reqwest::Client, base: &str, cookie: &str) -> String {
    http.get(format!("{base}/"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The `name=value` of the cookie a login set, with what `Set-Cookie`
/// said of it.
pub fn session_cookie(login: &reqwest::Response) -> (String, String) {
    let set = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    let cookie = set.split(';').next().unwrap().to_owned();
    (cookie, set)
}

/// The CSRF token in a page's forms.
pub fn csrf_of(html: &str) -> String {
    html.split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no form on the page: {html}"))
        .split('"')
        .next()
        .unwrap()
        .to_owned()
}
