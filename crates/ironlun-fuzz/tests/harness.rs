//! The `initiator` harness drives ironlun-initiator-core, the session
//! logic the tokio driver runs, and nothing under it. A harness that
//! drove ironlun-proto's connection state machines itself would be a
//! second initiator driver free to disagree with the real one (it did:
//! it answered a target's logout request with a Logout while the driver
//! dropped the connection). The recorders in `seeds.rs` that play an
//! initiator against the target harnesses are clients for those
//! targets, not this harness, and are not held to this.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

/// The harness's source files.
const HARNESS: [(&str, &str); 3] = [
    ("mod.rs", include_str!("../src/initiator/mod.rs")),
    ("ffp.rs", include_str!("../src/initiator/ffp.rs")),
    (
        "login_check.rs",
        include_str!("../src/initiator/login_check.rs"),
    ),
];

/// What only a driver of ironlun-proto's initiator state machines
/// names: the machines, their outputs, and the calls whose rules the
/// core owns (logout, taking commands back, failing a connection).
const DRIVER_PARTS: [&str; 10] = [
    "InitiatorSession",
    "InitiatorLogin",
    "LoginProgress",
    "SessionEvent",
    "take_unfinished",
    "submit_logout",
    "submit_task_mgmt",
    "submit_text",
    "submit_ping",
    ".fail(",
];

/// The code of a source file, without its comments.
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_initiator_harness_drives_the_core_and_nothing_under_it() {
    for (file, text) in HARNESS {
        let code = code(text);
        for part in DRIVER_PARTS {
            assert!(
                !code.contains(part),
                "src/initiator/{file} names {part}: the harness must drive the \
                 initiator through ironlun-initiator-core only"
            );
        }
    }
    let harness = code(HARNESS[0].1);
    for call in [
        "InitiatorCore::new",
        "handle_connected",
        "handle_frame(",
        "handle_timeout",
        "handle_connection_lost",
        "poll_transmit",
        "poll_completion",
        "poll_orphan",
        "poll_event",
    ] {
        assert!(harness.contains(call), "the harness does not call {call}");
    }
}

/// The check above can fail: the harness as it was before it drove the
/// core names the machines it drove.
#[test]
fn the_check_sees_a_harness_that_drives_the_protocol_itself() {
    let old = "let mut s = InitiatorSession::new(outcome, limits, now);\n\
               s.submit_logout(0, 0, token);";
    assert!(DRIVER_PARTS.iter().any(|p| code(old).contains(p)));
    assert!(!code("// InitiatorSession in a comment").contains("InitiatorSession"));
}
