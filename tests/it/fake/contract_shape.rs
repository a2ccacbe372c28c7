//! Contract pinning: the fake server's canned bodies must have the same shape (keys and
//! JSON types, at every level) as the bodies a real QwenPaw 2.2.2.post1 returned in the
//! end-to-end scenarios (`tests/data/qwenpaw-2.2.2-bodies.json`, rewritten by
//! `ATC_E2E_RECORD=1 tests/e2e/run-all`). A change in QwenPaw's answers then fails here
//! instead of drifting silently away from what the fast suite believes.

use crate::support;

use serde_json::Value;
use support::{bodies, shape};

#[test]
fn the_fakes_bodies_have_the_shape_of_the_real_servers() {
    let recorded: Value =
        serde_json::from_str(include_str!("../../data/qwenpaw-2.2.2-bodies.json")).unwrap();
    let not_found = bodies::not_found("task-000000000000");
    let pairs: [(&str, &str); 10] = [
        ("running", bodies::RUNNING),
        ("finished_completed", bodies::FINISHED_COMPLETED),
        ("finished_failed_llm", bodies::FINISHED_FAILED_LLM),
        ("finished_timeout", bodies::FINISHED_TIMEOUT),
        ("finished_cancelled", bodies::FINISHED_CANCELLED),
        ("not_found", &not_found),
        ("busy_409", bodies::BUSY_409),
        ("auth_401_runtime", bodies::AUTH_401_RUNTIME),
        ("submit_ok", bodies::SUBMIT_OK),
        ("frontend_plugin_atc", bodies::FRONTEND_PLUGIN_ATC),
    ];
    let mut problems = Vec::new();
    for (name, fake) in pairs {
        let real = recorded
            .get(name)
            .unwrap_or_else(|| panic!("the fixture has no recorded {name} body"));
        let fake: Value = serde_json::from_str(fake).unwrap();
        shape::diff(name, &fake, real, ("fake", "real"), &mut problems);
    }
    assert!(
        problems.is_empty(),
        "fake and real bodies differ:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_fixed_texts_are_the_real_ones() {
    let recorded: Value =
        serde_json::from_str(include_str!("../../data/qwenpaw-2.2.2-bodies.json")).unwrap();
    for (name, fake) in [
        ("busy_409", bodies::BUSY_409),
        ("auth_401_runtime", bodies::AUTH_401_RUNTIME),
        ("finished_timeout", bodies::FINISHED_TIMEOUT),
    ] {
        let fake: Value = serde_json::from_str(fake).unwrap();
        let real = &recorded[name];
        match name {
            "finished_timeout" => assert_eq!(fake["result"], real["result"]),
            _ => assert_eq!(&fake, real, "{name}"),
        }
    }
    assert!(
        recorded["not_found"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("Task not found: task-")
    );
}

#[test]
fn the_shape_check_notices_a_change() {
    let fake: Value = serde_json::from_str(bodies::FINISHED_COMPLETED).unwrap();
    let mut real = fake.clone();
    real["result"]["output"][0]["content"][0]["text"] = Value::Null;
    real["result"]["final_response"] = Value::from("x");
    let mut problems = Vec::new();
    shape::diff("b", &fake, &real, ("fake", "real"), &mut problems);
    assert_eq!(problems.len(), 2, "{problems:?}");
}
