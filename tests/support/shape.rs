//! The shape of a JSON body: keys and JSON types at every level. Shared by the fast
//! contract-pinning test and the real-QwenPaw scenarios (which include it by path).

use serde_json::Value;

pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every difference in shape between `left` and `right`, as JSON paths; `names` says what
/// the two sides are (e.g. `("fake", "real")`).
pub fn diff(path: &str, left: &Value, right: &Value, names: (&str, &str), out: &mut Vec<String>) {
    if kind(left) != kind(right) {
        out.push(format!(
            "{path}: {} has {}, {} has {}",
            names.0,
            kind(left),
            names.1,
            kind(right)
        ));
        return;
    }
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for key in l.keys().filter(|k| !r.contains_key(*k)) {
                out.push(format!("{path}.{key}: only in the {} body", names.0));
            }
            for key in r.keys().filter(|k| !l.contains_key(*k)) {
                out.push(format!("{path}.{key}: only in the {} body", names.1));
            }
            for (key, lv) in l {
                if let Some(rv) = r.get(key) {
                    diff(&format!("{path}.{key}"), lv, rv, names, out);
                }
            }
        }
        (Value::Array(l), Value::Array(r)) => {
            if l.is_empty() != r.is_empty() {
                out.push(format!("{path}: one array is empty, the other is not"));
            }
            for (i, (lv, rv)) in l.iter().zip(r).enumerate() {
                diff(&format!("{path}[{i}]"), lv, rv, names, out);
            }
        }
        _ => {}
    }
}
