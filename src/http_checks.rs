//! The checks every HTTP endpoint of portcullis makes before it reads a
//! body: which host a request names (DNS rebinding), which page sent it
//! (Origin), and the bearer token it carries. Shared by `/mcp` and the
//! approvals page, so that both refuse alike.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};

/// Host names every loopback client may use.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The host part of a `Host` header, lower case, without its port.
pub fn host_name(value: &str) -> Option<String> {
    let value = value.trim();
    let host = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        inside
    } else {
        match value.rsplit_once(':') {
            Some((host, port)) if is_port(port) && !host.contains(':') => host,
            Some(_) => return None,
            None if !value.contains(':') => value,
            None => return None,
        }
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// `http(s)://` a loopback name, any port, nothing after.
pub fn is_loopback_origin(origin: &str) -> bool {
    let Ok(uri) = origin.parse::<axum::http::Uri>() else {
        return false;
    };
    let web = matches!(uri.scheme_str(), Some("http" | "https"));
    let bare = uri.path_and_query().is_none_or(|p| p.as_str() == "/")
        && !uri.authority().is_some_and(|a| a.as_str().contains('@'));
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    web && bare && LOOPBACK_HOSTS.contains(&host)
}

pub fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether the request names its host more than one way: two `Host`
/// headers, or an absolute-form target (`POST http://a/mcp`) whose
/// authority is not its `Host`. Only one of them would be checked, and a
/// proxy in front may route by the other.
pub fn host_ambiguous(request: &Request) -> bool {
    let hosts: Vec<&HeaderValue> = request.headers().get_all(header::HOST).iter().collect();
    match (hosts.as_slice(), request.uri().authority()) {
        ([host], Some(authority)) => !host
            .to_str()
            .is_ok_and(|host| host.eq_ignore_ascii_case(authority.as_str())),
        ([] | [_], _) => false,
        _ => true,
    }
}

/// The token of an `Authorization: Bearer` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
