//! Whether a result another server sent fits what portcullis advertised for
//! its tool. A client's SDK checks `structuredContent` against the output
//! schema it was shown and throws on a misfit, so the client would never
//! read the answer: portcullis checks first and turns a misfit into an
//! error result the client can read.

use std::sync::LazyLock;

use serde_json::Value;

use super::reason::refusal_schema;
use crate::tools::{ArgumentValidator, SchemaError};

/// The refusal body every advertised output schema admits beside the
/// tool's own result (`mcp::errors::output_schema`).
static REFUSAL: LazyLock<Result<ArgumentValidator, SchemaError>> =
    LazyLock::new(|| ArgumentValidator::compile(&refusal_schema()));

/// Why `result` (a `CallToolResult` as JSON) does not fit the output schema
/// `output`, or `None` when it does. A success must carry structured content
/// that fits; an error result need not carry any, and what it carries must
/// fit the tool's schema or read as a refusal, as the advertised schema
/// says.
pub fn misfit(result: &Value, output: &ArgumentValidator) -> Option<String> {
    let is_error = result.get("isError") == Some(&Value::Bool(true));
    let Some(content) = result.get("structuredContent") else {
        return (!is_error).then(|| {
            "the tool declares an output schema and its result has no structuredContent".to_owned()
        });
    };
    let problems = output.check(content).err()?;
    let refusal = match &*REFUSAL {
        Ok(refusal) => refusal.check(content).is_ok(),
        Err(_) => false,
    };
    if is_error && refusal {
        return None;
    }
    Some(format!(
        "the tool's structuredContent does not fit its output schema: {}",
        problems.problems.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> ArgumentValidator {
        ArgumentValidator::compile(&json!({
            "type": "object",
            "properties": {"verdict": {"enum": ["allow", "deny"]}},
            "required": ["verdict"]
        }))
        .unwrap()
    }

    #[test]
    fn a_success_that_fits_passes() {
        let result = json!({"content": [], "structuredContent": {"verdict": "allow"}});
        assert_eq!(misfit(&result, &schema()), None);
    }

    #[test]
    fn a_success_without_structured_content_is_named() {
        let result = json!({"content": [{"type": "text", "text": "allow"}]});
        let why = misfit(&result, &schema()).unwrap();
        assert!(why.contains("no structuredContent"), "{why}");
    }

    #[test]
    fn a_success_of_another_shape_names_the_problem() {
        let result = json!({"content": [], "structuredContent": {"verdict": "maybe"}});
        let why = misfit(&result, &schema()).unwrap();
        assert!(why.contains("/verdict"), "{why}");
    }

    #[test]
    fn an_error_may_carry_nothing_or_a_refusal() {
        let bare = json!({"content": [], "isError": true});
        assert_eq!(misfit(&bare, &schema()), None);
        let refusal = json!({"content": [], "isError": true,
            "structuredContent": {"reason_code": "tool_failed", "reason": "it broke"}});
        assert_eq!(misfit(&refusal, &schema()), None);
    }

    #[test]
    fn an_error_carrying_another_shape_does_not_fit() {
        let result = json!({"content": [], "isError": true, "structuredContent": {"oops": 1}});
        assert!(misfit(&result, &schema()).is_some());
    }

    #[test]
    fn a_refusal_shape_is_no_success() {
        let result = json!({"content": [],
            "structuredContent": {"reason_code": "tool_failed", "reason": "x"}});
        assert!(misfit(&result, &schema()).is_some());
    }
}
