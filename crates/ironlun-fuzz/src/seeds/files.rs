//! Seeds of the harnesses that read files: `state_files` (saved
//! persistent reservations and sanitize records, as ironlun writes them)
//! and `config_files` (a configuration with every section, and one
//! request per kind of operation on the harness's daemon).

use ironlun_scsi::reservations::{ItNexus, PrState, Registration, Reservation};

use super::{seed, Seed};

const ISID: [u8; 6] = [0x80, 0, 0, 0, 0, 1];

fn with(which: u8, text: &str) -> Vec<u8> {
    let mut v = vec![which];
    v.extend_from_slice(text.as_bytes());
    v
}

pub(crate) fn state_seeds() -> Vec<Seed> {
    let a = ItNexus::new("iqn.2026-11.test:a", ISID, 1);
    let evil = ItNexus::new(
        "iqn.2026-11.test:evil\nreserve 3 1 iqn.2026-11.test:a,i,0x800000000001",
        ISID,
        1,
    );
    let reg = |nexus: &ItNexus, key, all_tg_pt| Registration {
        nexus: nexus.clone(),
        key,
        all_tg_pt,
    };
    let pr = PrState {
        generation: 12,
        registrations: vec![reg(&a, 0xabc, false), reg(&evil, 0xdef, true)],
        reservation: Some(Reservation {
            holder: a.clone(),
            pr_type: 5,
        }),
        aptpl: true,
    };
    let v1 = "ironlun-pr 1\ngeneration 3\n\
        register 00000000000000aa 0 1 iqn.2026-11.test:a,i,0x800000000001\n\
        register 00000000000000bb 1 1 iqn.2026-11.test:b,i,0x800000000002\n\
        reserve 7 1 iqn.2026-11.test:a,i,0x800000000001\n";
    let running = "ironlun-sanitize 2\nlu 0123456789abcdef 512 2048\nstate running\n\
        method overwrite 3 1\npattern a5005aff\ndone 524288\nend\n";
    let erase = "ironlun-sanitize 2\nlu 0123456789abcdef 4096 256\nstate running\n\
        method block-erase\ndone 0\nend\n";
    let failed = "ironlun-sanitize 1\nlu 0123456789abcdef 512 2048\nstate failed\n";
    let mut built = vec![2];
    for (tag, name) in [
        (0x11, &b"iqn.2026-11.test:x"[..]),
        (0x93, b"a\nb c%\x7f\xc3\xa9"),
        (0x05, b""),
    ] {
        built.extend_from_slice(&[tag, name.len() as u8]);
        built.extend_from_slice(name);
    }
    vec![
        seed("state_files", "pr-v2", with(0, &pr.encode())),
        seed("state_files", "pr-v1", with(0, v1)),
        seed("state_files", "sanitize-overwrite", with(1, running)),
        seed("state_files", "sanitize-block-erase", with(1, erase)),
        seed("state_files", "sanitize-failed-v1", with(1, failed)),
        seed("state_files", "pr-built", built),
    ]
}

/// A configuration with every section the file may have.
const CONFIG: &str = r#"listen = ["127.0.0.1:3260", "[::1]:3260"]
log = "info"
state_dir = "/var/lib/ironlun"
stats = "127.0.0.1:9260"
io_engine = "pool"

[tcp]
send_buffer = "512KiB"
recv_buffer = "512KiB"
nodelay = true
quickack = false

[limits]
max_sessions = 256
max_connections = 1024
login_timeout_secs = 15
login_text_limit = 65536
nop_interval_secs = 30
nop_timeout_secs = 30
shutdown_grace_secs = 3
max_transfer_length = "8MiB"

[defaults]
queue_depth = 128
header_digest = ["None", "CRC32C"]
data_digest = ["None", "CRC32C"]
initial_r2t = false
immediate_data = true
max_recv_data_segment_length = 262144
max_burst_length = 1048576
first_burst_length = 524288
default_time2wait = 2
default_time2retain = 20
max_outstanding_r2t = 8
max_connections = 1

[discovery]
chap = "finder:finder-secret-89"
mutual_chap = "portal:portal-secret-12"

[[target]]
name = "iqn.2026-11.test:disk1"
alias = "disk1"
portal_group_tag = 1
allow = ["iqn.2026-11.test:host1", "10.1.0.0/16"]
chap = "alice:alice-secret-0123"
mutual_chap = "disk1:disk1-secret-456"
default_map = "all"

[target.params]
first_burst_length = 262144

[[target.lun]]
spec = "ram:1GiB,thin,sanitize,sanitize_rate=100MiB,rotation=ssd"

[[target.lun]]
number = 5
spec = "file:/srv/disk.img,size=20GiB,direct,bs=4096"

[[target.initiator]]
name = "iqn.2026-11.test:host1"
luns = [{ lun = 0, target_lun = 5, read_only = true }, { lun = 1, target_lun = 0 }]
chap = "host1:host1-secret-789"
"#;

/// The harness daemon's configuration with a LUN and a target more.
const APPLIED: &str = r#"listen = ["127.0.0.1:3260"]

[[target]]
name = "iqn.2026-11.test:fuzz"
[[target.lun]]
spec = "ram:64KiB"
[[target.lun]]
spec = "null:1GiB"
[[target.lun]]
spec = "ram:1MiB,thin"

[[target]]
name = "iqn.2026-11.test:second"
default_map = "none"
[[target.lun]]
spec = "null:1TiB,bs=4096"
[[target.initiator]]
name = "iqn.2026-11.test:h"
luns = [{ lun = 0, target_lun = 0 }]
"#;

pub(crate) fn config_seeds() -> Vec<Seed> {
    const T: &str = "iqn.2026-11.test:fuzz";
    let op = |json: String| with(1, &json);
    let minimal =
        "[[target]]\nname = \"iqn.2026-11.test:t\"\n[[target.lun]]\nspec = \"null:1GiB\"\n";
    vec![
        seed("config_files", "config-every-section", with(0, CONFIG)),
        seed("config_files", "config-minimal", with(0, minimal)),
        seed(
            "config_files",
            "op-add-target",
            op(r#"{"op":"add-target","name":"iqn.2026-11.test:new","luns":["ram:1MiB"]}"#.into()),
        ),
        seed(
            "config_files",
            "op-set-target",
            op(format!(
                r#"{{"op":"set-target","name":"{T}","alias":"a","allow":["10.0.0.0/8"],"chap":"u:secret-secret-1","default_map":"none"}}"#
            )),
        ),
        seed(
            "config_files",
            "op-add-lun",
            op(format!(
                r#"{{"op":"add-lun","target":"{T}","spec":"ram:1MiB","lun":7}}"#
            )),
        ),
        seed(
            "config_files",
            "op-resize-lun",
            op(format!(
                r#"{{"op":"resize-lun","target":"{T}","lun":0,"size":"128KiB"}}"#
            )),
        ),
        seed(
            "config_files",
            "op-set-initiator",
            op(format!(
                r#"{{"op":"set-initiator","target":"{T}","name":"iqn.2026-11.test:h","luns":[{{"lun":0,"target_lun":1,"read_only":true}}],"chap":"h:secret-secret-2"}}"#
            )),
        ),
        seed(
            "config_files",
            "op-remove-lun",
            op(format!(
                r#"{{"op":"remove-lun","target":"{T}","lun":1,"force":true}}"#
            )),
        ),
        seed(
            "config_files",
            "op-online-lun",
            op(format!(r#"{{"op":"online-lun","target":"{T}","lun":0}}"#)),
        ),
        seed(
            "config_files",
            "op-apply",
            op(serde_json::json!({"op": "apply", "toml": APPLIED}).to_string()),
        ),
        seed(
            "config_files",
            "op-apply-refused",
            op(serde_json::json!({"op": "apply", "toml": CONFIG}).to_string()),
        ),
    ]
}
