//! Tests of the configuration: LUN specs, flags, the file form and the
//! messages of every kind of mistake.

use std::path::Path;
use std::time::Duration;

use ironlun_proto::names::NameProblem;
use ironlun_proto::params::DigestKind;

use super::*;

#[test]
fn lun_specs() {
    let s: LunSpec = "ram:1GiB".parse().unwrap();
    assert_eq!(s.backend, BackendSpec::Ram { size: 1 << 30 });
    assert_eq!(s.block_size, 512);
    let s: LunSpec = "null:64M,bs=4096,ro".parse().unwrap();
    assert_eq!(s.backend, BackendSpec::Null { size: 64 << 20 });
    assert_eq!((s.block_size, s.read_only), (4096, true));
    let s: LunSpec = "file:/tmp/x.img,size=1G,direct,prealloc".parse().unwrap();
    assert_eq!(
        s.backend,
        BackendSpec::File {
            path: "/tmp/x.img".into(),
            size: Some(1 << 30),
            grow: false,
            direct: true,
            preallocate: true
        }
    );
    let s: LunSpec = "block:/dev/loop0".parse().unwrap();
    assert!(matches!(s.backend, BackendSpec::Block { .. }));
    let s: LunSpec = "ram:1G,pbs=4096".parse().unwrap();
    assert_eq!((s.block_size, s.physical_block_size), (512, Some(4096)));
    assert!("ram:1G,bs=4096,pbs=512".parse::<LunSpec>().is_err());
    let s: LunSpec = "file:/x,pbs=8k".parse().unwrap();
    assert_eq!(s.physical_block_size, Some(8192));
    let s: LunSpec = "file:/x".parse().unwrap();
    assert_eq!(s.physical_block_size, None, "the store's");
    for bad in ["pbs=1000", "pbs=256", "pbs=128KiB", "pbs=", "pbs=x"] {
        let spec = format!("file:/x,{bad}");
        assert!(spec.parse::<LunSpec>().is_err(), "{spec}");
    }
    let s: LunSpec = "ram:1G,thin".parse().unwrap();
    assert!(s.thin && !s.sanitize);
    let s: LunSpec = "file:/x,thin,sanitize".parse().unwrap();
    assert!(s.thin && s.sanitize);
    for bad in [
        "ram",
        "ram:",
        "disk:1G",
        "ram:1G,bs=1024",
        "file:/x,bogus",
        "ram:1G,direct",
        "block:/dev/x,size=1G",
        "ram:100",
        "ram:1000",
        "null:1.5KB,bs=4096",
        "ram:1.1KiB",
        "block:/dev/x,thin",
        "file:/x,size=1G,thin,prealloc",
    ] {
        assert!(bad.parse::<LunSpec>().is_err(), "{bad} should fail");
    }
}

/// `,grow` lets an existing file smaller than `size=` grow to it (the
/// open refuses it otherwise); it means nothing without `size=`, on a
/// read-only LUN, or on another kind than `file:`.
#[test]
fn grow_is_a_file_option_with_a_size() {
    let s: LunSpec = "file:/x.img,size=1GiB,grow".parse().unwrap();
    assert!(matches!(
        s.backend,
        BackendSpec::File {
            size: Some(0x4000_0000),
            grow: true,
            ..
        }
    ));
    let s: LunSpec = "file:/x.img,size=1GiB".parse().unwrap();
    assert!(matches!(s.backend, BackendSpec::File { grow: false, .. }));
    for (bad, why) in [
        (
            "file:/x.img,grow",
            "grow needs size= (the size to grow the file to)",
        ),
        (
            "file:/x.img,size=1G,grow,ro",
            "grow writes the file: not with ro",
        ),
        ("ram:1G,grow", "grow is a file: option"),
        ("null:1G,grow", "grow is a file: option"),
        ("block:/dev/x,grow", "grow is a file: option"),
        ("rbd:p/i,grow", "grow is a file: option"),
        ("file:/x.img,size=1G,grow=yes", "unknown option 'grow=yes'"),
    ] {
        let e = bad.parse::<LunSpec>().unwrap_err().to_string();
        assert!(e.starts_with(&format!("LUN '{bad}': {why}")), "{e}");
    }
}

/// Sizes with a decimal fraction are exact; a RAM or null size must be
/// whole blocks, and the error says so.
#[test]
fn fractional_sizes_are_exact_and_whole_blocks() {
    let s: LunSpec = "ram:1.5MiB".parse().unwrap();
    assert!(matches!(s.backend, BackendSpec::Ram { size } if size == 3 << 19));
    let s: LunSpec = "null:1.5GiB,bs=4096".parse().unwrap();
    assert!(matches!(s.backend, BackendSpec::Null { size } if size == 3 << 29));
    let e = "ram:1000".parse::<LunSpec>().unwrap_err().to_string();
    assert!(
        e.contains("1000 bytes is not a whole number of 512-byte blocks"),
        "{e}"
    );
    let e = "ram:1.1KiB".parse::<LunSpec>().unwrap_err().to_string();
    assert!(e.contains("not a whole number of bytes"), "{e}");
}

#[test]
fn flags_give_one_target_with_numbered_luns() {
    let c = Config::load(&Overrides {
        name: Some("iqn.2026-11.test:a".into()),
        luns: vec!["ram:1M".into(), "null:1M".into()],
        listen: vec!["[::1]:3261".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.listen[0].to_string(), "[::1]:3261");
    assert_eq!(c.targets[0].luns[1].number, 1);
    assert!(Config::load(&Overrides::default())
        .unwrap_err()
        .to_string()
        .contains("no LUN"));
    let e = Config::load(&Overrides {
        luns: vec!["ram:1M".into()],
        name: Some("bad name".into()),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("--name"));
    assert!(Config::load(&Overrides {
        luns: vec!["ram:1M".into()],
        listen: vec!["localhost".into()],
        ..Default::default()
    })
    .is_err());
}

#[test]
fn default_name_is_a_valid_iqn() {
    assert_eq!(
        normalize_iscsi_name(&default_target_name()).unwrap(),
        default_target_name()
    );
}

#[test]
fn toml_form() {
    let text = r#"
listen = ["127.0.0.1:3262"]
log = "debug"
stats = "127.0.0.1:9262"
[tcp]
send_buffer = "512KiB"
recv_buffer = "512KiB"
nodelay = false
quickack = true
[limits]
max_sessions = 8
nop_interval_secs = 0
[defaults]
queue_depth = 32
max_burst_length = 524288
[[target]]
name = "iqn.2026-11.test:one"
alias = "one"
[target.params]
first_burst_length = 262144
initial_r2t = true
header_digest = ["CRC32C", "None"]
[[target.lun]]
spec = "ram:16MiB"
[[target.lun]]
number = 5
spec = "null:1GiB,bs=4096"
"#;
    let c = Config::from_toml(text, None).unwrap();
    assert_eq!(c.limits.max_sessions, 8);
    assert_eq!(c.limits.nop_interval, None);
    let t = &c.targets[0];
    assert_eq!(t.queue_depth, 32);
    assert_eq!(t.offers.max_burst_length, 524288);
    assert_eq!(t.offers.first_burst_length, 262144);
    assert!(t.offers.initial_r2t);
    assert_eq!(t.offers.header_digest[0], DigestKind::Crc32c);
    assert_eq!(t.luns[1].number, 5);
    assert_eq!(c.stats, Some("127.0.0.1:9262".parse().unwrap()));
    assert_eq!(
        c.tcp,
        TcpTuning {
            send_buffer: Some(512 << 10),
            recv_buffer: Some(512 << 10),
            nodelay: false,
            quickack: true,
            busy_poll: Duration::ZERO,
        }
    );
    let e = Config::from_toml(&text.replace("512KiB", "1k"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tcp.send_buffer"), "{e}");
    let e = Config::from_toml(&text.replace("127.0.0.1:9262", "localhost"), None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("stats:"), "{e}");
    // The I/O engine: io_uring unless told otherwise.
    assert_eq!(c.io_engine, IoEngine::Uring);
    let pool = format!("io_engine = \"pool\"\n{text}");
    assert_eq!(
        Config::from_toml(&pool, None).unwrap().io_engine,
        IoEngine::Pool
    );
    let bad = format!("io_engine = \"threads\"\n{text}");
    let e = Config::from_toml(&bad, None).unwrap_err().to_string();
    assert!(
        e.starts_with("io_engine:") && e.contains("uring or pool"),
        "{e}"
    );
}

#[test]
fn io_engine_flag() {
    let o = |engine: &str| Overrides {
        luns: vec!["ram:1MiB".into()],
        io_engine: Some(engine.into()),
        ..Overrides::default()
    };
    assert_eq!(Config::load(&o("pool")).unwrap().io_engine, IoEngine::Pool);
    assert_eq!(
        Config::load(&o("uring")).unwrap().io_engine,
        IoEngine::Uring
    );
    let e = Config::load(&o("aio")).unwrap_err().to_string();
    assert!(e.starts_with("--io-engine:"), "{e}");
}

#[test]
fn the_documented_example_parses() {
    let doc = include_str!("../../../docs/config.md");
    let start = doc.find("```toml\n").unwrap() + 8;
    let end = start + doc[start..].find("```").unwrap();
    let c = Config::from_toml(&doc[start..end], None).unwrap();
    assert_eq!(c.listen.len(), 2);
    assert_eq!(c.targets[0].offers.first_burst_length, 262144);
    assert_eq!(c.targets[0].luns[1].number, 5);
    let chap = c.targets[0].chap.as_ref().unwrap();
    assert_eq!(chap.initiator.user, "alice");
    assert_eq!(chap.target.as_ref().unwrap().user, "disk1");
    assert_eq!(c.discovery_chap.as_ref().unwrap().initiator.user, "finder");
    assert!(!c.targets[0].acl.is_open());
    assert_eq!(
        c.limits,
        Limits::default(),
        "the example shows the defaults"
    );
    assert_eq!(c.io_engine, IoEngine::default());
}

#[test]
fn toml_errors_name_the_problem() {
    let e = Config::from_toml(
        "[[target]]\nname = \"iqn.2026-11.test:y\"\nbogus = 1\n",
        Some(Path::new("t.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("t.toml: line "), "{e}");
    assert!(e.contains("bogus"), "{e}");
    let e = Config::from_toml(
        "[[target]]\nname = \"iqn.2026-11.test:y\"\n[[target.lun]]\nspec = \"ram:1Q\"\n",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("lun[0]"), "{e}");
    let e = Config::from_toml(
        "[[target]]\nname = \"iqn.2026-11.test:y\"\n[target.params]\nfirst_burst_length = 1048576\nmax_burst_length = 65536\n[[target.lun]]\nspec = \"ram:1M\"\n",
        None,
    )
    .unwrap_err().to_string();
    assert!(e.contains("FirstBurstLength"), "{e}");
    let e = Config::from_toml("[[target]]\nname = \"iqn.2026-11.test:y\"\n[target.params]\nmax_burst_length = 100\n[[target.lun]]\nspec = \"ram:1M\"\n", None).unwrap_err().to_string();
    assert!(e.contains("MaxBurstLength"), "{e}");
    assert!(Config::from_toml("", None)
        .unwrap_err()
        .to_string()
        .contains("no [[target]]"));
}

// --- One test per kind of mistake: the variant, and its scope in the
// message. ---------------------------------------------------------------

const TARGET: &str = "[[target]]\nname = \"iqn.2026-11.test:t\"\n";
const LUN: &str = "[[target.lun]]\nspec = \"ram:1M\"\n";

/// The error `text` gives as `scope.toml`, its message, and the mistake
/// inside the file.
fn file_error(text: &str) -> (String, ConfigError) {
    let e = Config::from_toml(text, Some(Path::new("scope.toml"))).unwrap_err();
    let message = e.to_string();
    assert!(message.starts_with("scope.toml: "), "{message}");
    match e {
        ConfigError::InFile { path, source } => {
            assert_eq!(path, Path::new("scope.toml"));
            (message, *source)
        }
        other => panic!("not wrapped in the file: {other:?}"),
    }
}

/// The error `text` gives without a file (no permission check).
fn text_error(text: &str) -> (String, ConfigError) {
    let e = Config::from_toml(text, None).unwrap_err();
    (e.to_string(), e)
}

/// The message says `part`.
fn mentions(message: &str, part: &str) {
    assert!(message.contains(part), "'{message}' should say '{part}'");
}

fn flags_error(o: Overrides) -> (String, ConfigError) {
    let e = Config::load(&o).unwrap_err();
    (e.to_string(), e)
}

fn one_lun() -> Overrides {
    Overrides {
        luns: vec!["ram:1M".into()],
        ..Overrides::default()
    }
}

#[test]
fn unreadable_file_names_it() {
    let (m, e) = flags_error(Overrides {
        config: Some("/nonexistent/ironlun.toml".into()),
        ..Overrides::default()
    });
    assert!(matches!(e, ConfigError::Read { .. }), "{e:?}");
    assert!(m.starts_with("/nonexistent/ironlun.toml: "), "{m}");
}

#[test]
fn syntax_errors_give_the_line() {
    let (m, e) = file_error(&format!("{TARGET}{LUN}listen = [1,\n"));
    assert!(
        matches!(e, ConfigError::Syntax { line: Some(5), .. }),
        "{e:?}"
    );
    assert!(m.starts_with("scope.toml: line 5: "), "{m}");
}

#[test]
fn flags_that_belong_in_the_file() {
    let (m, e) = flags_error(Overrides {
        config: Some("x.toml".into()),
        ..one_lun()
    });
    assert!(matches!(e, ConfigError::FlagsWithFile), "{e:?}");
    assert!(m.contains("--lun") && m.contains("--config"), "{m}");
}

#[test]
fn nothing_to_serve() {
    let (m, e) = flags_error(Overrides::default());
    assert!(matches!(e, ConfigError::NoLuns), "{e:?}");
    mentions(&m, "--lun SPEC");
    let (m, e) = file_error("log = \"info\"\n");
    assert!(matches!(e, ConfigError::NoTargets), "{e:?}");
    mentions(&m, "[[target]]");
    let (m, e) = file_error(TARGET);
    assert!(matches!(e, ConfigError::NoTargetLuns { .. }), "{e:?}");
    mentions(&m, "target iqn.2026-11.test:t has no");
}

#[test]
fn bad_addresses_name_key_and_value() {
    let (m, e) = file_error(&format!("listen = [\"here\"]\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::Address { .. }), "{e:?}");
    mentions(&m, "listen: listen address 'here'");
    let (m, _) = flags_error(Overrides {
        listen: vec!["there".into()],
        ..one_lun()
    });
    assert!(m.starts_with("--listen: ") && m.contains("'there'"), "{m}");
}

/// `HOST:PORT` is refused as a host name, saying only IP addresses are
/// accepted; other shapes stay "not ADDR:PORT".
#[test]
fn host_names_are_refused_as_such() {
    for (value, host) in [
        ("localhost:3260", true),
        ("san.example:3260", true),
        ("here", false),
        ("127.0.0.1", false),
        ("[::1]", false),
        ("::1:3260", false),
    ] {
        let (m, e) = flags_error(Overrides {
            listen: vec![value.into()],
            ..one_lun()
        });
        assert_eq!(
            matches!(e, ConfigError::HostName { .. }),
            host,
            "{value}: {e:?}"
        );
        if host {
            mentions(&m, "host names are not accepted, only IP addresses");
        } else {
            mentions(&m, "is not ADDR:PORT");
        }
    }
    let (m, _) = file_error(&format!("stats = \"stats.example:9100\"\n{TARGET}{LUN}"));
    mentions(
        &m,
        "stats: 'stats.example:9100': host names are not accepted",
    );
}

#[test]
fn out_of_range_values_name_key_value_and_range() {
    let (m, e) = file_error(&format!("[limits]\nmax_sessions = 0\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::OutOfRange { .. }), "{e:?}");
    mentions(&m, "limits.max_sessions 0: must be at least 1");
    let (m, _) = file_error(&format!(
        "[limits]\nmax_transfer_length = \"1k\"\n{TARGET}{LUN}"
    ));
    mentions(&m, "limits.max_transfer_length 1k: must be 4KiB..=64MiB");
    let (m, _) = file_error(&format!("[limits]\nlogin_text_limit = 100\n{TARGET}{LUN}"));
    mentions(&m, "limits.login_text_limit 100");
    let (m, _) = flags_error(Overrides {
        queue_depth: Some(5000),
        ..one_lun()
    });
    assert!(m.starts_with("--queue-depth 5000: must be 1..=4096"), "{m}");
    let (m, _) = flags_error(Overrides {
        tcp_window: Some("1G".into()),
        ..one_lun()
    });
    assert!(m.starts_with("--tcp-window 1G: "), "{m}");
}

/// Latency mode's budget: a duration up to 1 ms, in the file's `[tcp]`
/// or as `--busy-poll`; off unless set.
#[test]
fn busy_poll_is_a_bounded_duration() {
    let c =
        Config::from_toml(&format!("[tcp]\nbusy_poll = \"50us\"\n{TARGET}{LUN}"), None).unwrap();
    assert_eq!(c.tcp.busy_poll, Duration::from_micros(50));
    let c = Config::from_toml(&format!("{TARGET}{LUN}"), None).unwrap();
    assert_eq!(c.tcp.busy_poll, Duration::ZERO, "off by default");
    let c = Config::load(&Overrides {
        busy_poll: Some("1ms".into()),
        ..one_lun()
    })
    .unwrap();
    assert_eq!(c.tcp.busy_poll, MAX_BUSY_POLL);
    let (m, e) = file_error(&format!("[tcp]\nbusy_poll = \"2ms\"\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::OutOfRange { .. }), "{e:?}");
    mentions(&m, "tcp.busy_poll 2ms: must be 0 (off) ..= 1ms");
    let (m, e) = file_error(&format!("[tcp]\nbusy_poll = \"soon\"\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
    mentions(&m, "tcp.busy_poll: 'soon' is not a duration");
    let (m, _) = flags_error(Overrides {
        busy_poll: Some("5s".into()),
        ..one_lun()
    });
    assert!(m.starts_with("--busy-poll 5s: must be 0 (off)"), "{m}");
}

#[test]
fn refused_values_name_the_key() {
    let (m, e) = file_error(&format!("[tcp]\nrecv_buffer = \"lots\"\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
    mentions(&m, "tcp.recv_buffer: size 'lots'");
    let (m, _) = file_error(&format!("{TARGET}allow = [\"host1\"]\n{LUN}"));
    mentions(&m, "target iqn.2026-11.test:t allow: ");
    let (m, _) = flags_error(Overrides {
        allow: vec!["10.0.0.0/40".into()],
        ..one_lun()
    });
    assert!(
        m.starts_with("--allow: ") && m.contains("10.0.0.0/40"),
        "{m}"
    );
}

#[test]
fn unknown_io_engine() {
    let (m, e) = file_error(&format!("io_engine = \"aio\"\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::IoEngine { .. }), "{e:?}");
    mentions(&m, "io_engine: I/O engine 'aio'");
}

#[test]
fn bad_names_say_where_and_which() {
    let (m, e) = file_error(&format!(
        "{TARGET}{LUN}[[target]]\nname = \"disk 2\"\n{LUN}"
    ));
    assert!(
        matches!(
            e,
            ConfigError::Name {
                source: NameError {
                    problem: NameProblem::Character(' '),
                    ..
                },
                ..
            }
        ),
        "{e:?}"
    );
    mentions(&m, "target[1].name: iSCSI name \"disk 2\" contains a space");
    let (m, e) = file_error(&format!(
        "{TARGET}{LUN}{}{LUN}",
        TARGET.replace("iqn.2026-11.test:t", "IQN.2026-11.TEST:T")
    ));
    assert!(matches!(e, ConfigError::DuplicateTarget { .. }), "{e:?}");
    // Compared, and named, in their normal form (RFC 3722).
    mentions(&m, "target name iqn.2026-11.test:t is defined twice");
}

#[test]
fn name_keys_ignore_ascii_case_at_any_length() {
    use std::collections::HashMap;
    let long = format!("iqn.2026-11.test:{}", "Ab".repeat(60));
    let upper = long.to_ascii_uppercase();
    let mut m = HashMap::new();
    m.insert(NameKey("iqn.2026-11.test:Disk"), 1);
    m.insert(NameKey(&long), 2);
    assert_eq!(m.get(&NameKey("IQN.2026-11.TEST:disk")), Some(&1));
    assert_eq!(m.get(&NameKey(&upper)), Some(&2));
    assert_eq!(m.get(&NameKey("iqn.2026-11.test:disk2")), None);
    assert_eq!(m.get(&NameKey(&long[..long.len() - 1])), None);
}

#[test]
fn a_store_serves_one_lun_only() {
    let file = |n: u16| format!("[[target.lun]]\nnumber = {n}\nspec = \"file:/srv/a.img\"\n");
    let other = TARGET.replace("test:t", "test:u");
    let (m, _) = text_error(&format!("{TARGET}{LUN}{}{other}{}", file(1), file(0)));
    mentions(
        &m,
        "target iqn.2026-11.test:u LUN 0: /srv/a.img is already the store of target iqn.2026-11.test:t LUN 1",
    );
    let (m, _) = text_error(&format!("{TARGET}{}{}", file(0), file(1)));
    mentions(&m, "target iqn.2026-11.test:t LUN 1: /srv/a.img is already the store of target iqn.2026-11.test:t LUN 0");
    let b = format!(
        "{TARGET}{}{other}[[target.lun]]\nspec = \"file:/srv/b.img\"\n",
        file(0)
    );
    Config::from_toml(&b, None).unwrap();
}

#[test]
fn lun_mistakes_name_target_and_lun() {
    let (m, e) = file_error(&format!(
        "{TARGET}{LUN}[[target.lun]]\nspec = \"ram:1M,bs=1024\"\n"
    ));
    assert!(
        matches!(
            &e,
            ConfigError::Lun { source, .. } if source.problem
                == LunSpecProblem::BlockSize { key: "bs", value: "1024".into() }
        ),
        "{e:?}"
    );
    mentions(
        &m,
        "target iqn.2026-11.test:t lun[1]: LUN 'ram:1M,bs=1024': bs=1024",
    );
    let (m, e) = file_error(&format!("{TARGET}{LUN}number = 16384\n"));
    assert!(
        matches!(e, ConfigError::LunNumber { number: 16384, .. }),
        "{e:?}"
    );
    mentions(&m, "target iqn.2026-11.test:t: LUN number 16384");
    let (m, e) = file_error(&format!("{TARGET}{LUN}{LUN}number = 0\n"));
    assert!(
        matches!(e, ConfigError::DuplicateLun { number: 0, .. }),
        "{e:?}"
    );
    mentions(&m, "target iqn.2026-11.test:t: LUN 0 defined twice");
    let (m, _) = flags_error(Overrides {
        luns: vec!["ram:1M".into(), "tape:1".into()],
        ..Overrides::default()
    });
    assert!(m.starts_with("--lun: LUN 'tape:1': unknown backend"), "{m}");
}

#[test]
fn params_name_the_target_and_the_key() {
    let (m, e) = file_error(&format!("{TARGET}[target.params]\nqueue_depth = 0\n{LUN}"));
    let ConfigError::Params { target, source } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(target, "iqn.2026-11.test:t");
    assert!(matches!(**source, ConfigError::OutOfRange { .. }), "{e:?}");
    mentions(&m, "target iqn.2026-11.test:t params: queue_depth 0");
    let (m, e) = file_error(&format!(
        "[defaults]\ndata_digest = [\"MD5\"]\n{TARGET}{LUN}"
    ));
    assert!(matches!(e, ConfigError::Params { .. }), "{e:?}");
    mentions(&m, "params: data_digest: unknown digest 'MD5'");
    let (m, e) = file_error(&format!(
        "{TARGET}[target.params]\nmax_connections = 2\n{LUN}"
    ));
    let ConfigError::Params { source, .. } = &e else {
        panic!("{e:?}");
    };
    assert!(matches!(**source, ConfigError::Offers { .. }), "{e:?}");
    mentions(&m, "params: MaxConnections");
}

#[test]
fn chap_mistakes_name_the_key_never_the_secret() {
    let (m, e) = text_error(&format!("[discovery]\nchap = \"nosecret\"\n{TARGET}{LUN}"));
    assert!(matches!(e, ConfigError::Chap { .. }), "{e:?}");
    assert!(
        m.contains("discovery.chap: ") && !m.contains("nosecret"),
        "{m}"
    );
    let (m, e) = text_error(&format!(
        "{TARGET}chap_env = \"A\"\nchap = \"u:0123456789abc\"\n{LUN}"
    ));
    assert!(
        matches!(e, ConfigError::ChapTwice { key: "chap", .. }),
        "{e:?}"
    );
    mentions(&m, "target iqn.2026-11.test:t: give chap or chap_env");
    let (m, e) = file_error(&format!(
        "{TARGET}chap_env = \"IRONLUN_TEST_SURELY_UNSET\"\n{LUN}"
    ));
    assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
    mentions(&m, "target iqn.2026-11.test:t.chap_env: environment variable IRONLUN_TEST_SURELY_UNSET is not set");
    let (m, e) = flags_error(Overrides {
        mutual_chap: Some("t:0123456789abc".into()),
        ..one_lun()
    });
    assert!(matches!(e, ConfigError::ChapPolicy { .. }), "{e:?}");
    assert!(m.starts_with("--chap/--mutual-chap: mutual CHAP"), "{m}");
    assert!(!m.contains("0123456789abc"), "{m}");
}

#[test]
fn files_with_secrets_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let text = format!("{TARGET}chap = \"u:0123456789abc\"\n{LUN}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("open.toml");
    std::fs::write(&path, &text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Config::from_toml(&text, Some(&path)).unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with(&format!("{}: ", path.display())), "{m}");
    mentions(&m, "world-readable (mode 644)");
    assert!(!m.contains("0123456789abc"), "{m}");
    let (m, e) = file_error(&text);
    assert!(matches!(e, ConfigError::Permissions { .. }), "{e:?}");
    mentions(&m, "cannot check its permissions");
}

#[test]
fn lun_rotation_option() {
    use ironlun_backend::Rotation;
    let r = |s: &str| s.parse::<LunSpec>().map(|l| l.rotation);
    assert_eq!(r("ram:1M"), Ok(None));
    assert_eq!(r("ram:1M,rotation=ssd"), Ok(Some(Rotation::NonRotating)));
    assert_eq!(r("file:/x,rotation=7200"), Ok(Some(Rotation::Rpm(7200))));
    assert_eq!(
        r("block:/dev/x,rotation=unknown"),
        Ok(Some(Rotation::NotReported))
    );
    let e = r("ram:1M,rotation=100").unwrap_err().to_string();
    assert!(
        e.contains("rotation=100") && e.contains("1025..=65534"),
        "{e}"
    );
}

#[test]
fn lun_sanitize_rate_option() {
    let r = |s: &str| s.parse::<LunSpec>().map(|l| l.sanitize_rate);
    assert_eq!(r("ram:1M,sanitize"), Ok(None));
    assert_eq!(
        r("ram:1M,sanitize,sanitize_rate=64MiB/s"),
        Ok(Some(64 << 20))
    );
    assert_eq!(
        r("file:/x,sanitize_rate=800Mbit,sanitize"),
        Ok(Some(100_000_000))
    );
    assert_eq!(r("ram:1M,sanitize,sanitize_rate=unlimited"), Ok(None));
    let e = r("ram:1M,sanitize,sanitize_rate=fast")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sanitize_rate") && e.contains("fast"), "{e}");
    let e = r("ram:1M,sanitize_rate=1MiB/s").unwrap_err().to_string();
    assert!(e.contains("sanitize_rate needs sanitize"), "{e}");
    // The file form takes the same spec.
    let text = "[[target]]\nname = \"iqn.2026-11.io.ironlun:t\"\n\
                [[target.lun]]\nspec = \"ram:16MiB,sanitize,sanitize_rate=2MB/s\"\n";
    let c = Config::from_toml(text, None).unwrap();
    assert_eq!(c.targets[0].luns[0].spec.sanitize_rate, Some(2_000_000));
}

#[test]
fn lun_soft_threshold_option() {
    use ironlun_scsi::SoftThreshold;
    let t = |s: &str| s.parse::<LunSpec>().map(|l| l.soft_threshold);
    assert_eq!(t("file:/x,thin"), Ok(None));
    assert_eq!(
        t("file:/x,size=8G,thin,soft_threshold=512MiB"),
        Ok(Some(SoftThreshold::Bytes(512 << 20)))
    );
    assert_eq!(
        t("file:/x,soft_threshold=10%,thin"),
        Ok(Some(SoftThreshold::Percent(10)))
    );
    assert_eq!(
        t("file:/x,thin,soft_threshold=100%"),
        Ok(Some(SoftThreshold::Percent(100)))
    );
    for bad in ["0", "0%", "101%", "-5%", "x%", "lots", ""] {
        let e = t(&format!("file:/x,thin,soft_threshold={bad}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("soft_threshold={bad} ")) && e.contains("percentage"),
            "{bad}: {e}"
        );
    }
    // Only on thin file LUs: the file system's free space is what it
    // watches.
    for spec in [
        "file:/x,soft_threshold=1G",
        "ram:1G,thin,soft_threshold=1M",
        "block:/dev/x,soft_threshold=1M",
    ] {
        let e = t(spec).unwrap_err().to_string();
        assert!(e.contains("needs a thin file LU"), "{spec}: {e}");
    }
    // The same in the file, where the spec is the same string.
    let text = r#"
[[target]]
name = "iqn.2026-11.test:one"
[[target.lun]]
spec = "file:/srv/a.img,size=1G,thin,soft_threshold=20%"
"#;
    let c = Config::from_toml(text, None).unwrap();
    assert_eq!(
        c.targets[0].luns[0].spec.soft_threshold,
        Some(SoftThreshold::Percent(20))
    );
    let e = Config::from_toml(&text.replace("20%", "200%"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lun[0]") && e.contains("soft_threshold=200%"),
        "{e}"
    );
}

#[test]
fn the_http_management_api_is_loopback_only_and_needs_a_token() {
    let base =
        "[[target]]\nname = \"iqn.2026-11.io.ironlun:t\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n";
    let load = |top: &str| Config::from_toml(&format!("{top}\n{base}"), None);
    let cfg = load("admin_http = \"127.0.0.1:9391\"\nadmin_token_file = \"/etc/t\"").unwrap();
    let h = cfg.admin_http.unwrap();
    assert_eq!(h.addr.to_string(), "127.0.0.1:9391");
    assert!(load("admin_http = \"[::1]:9391\"\nadmin_token_file = \"/t\"").is_ok());
    assert!(load("").unwrap().admin_http.is_none());
    for (top, says) in [
        (
            "admin_http = \"0.0.0.0:9391\"\nadmin_token_file = \"/t\"",
            "loopback",
        ),
        (
            "admin_http = \"192.168.1.2:9391\"\nadmin_token_file = \"/t\"",
            "loopback",
        ),
        ("admin_http = \"127.0.0.1:9391\"", "needs admin_token_file"),
        ("admin_token_file = \"/t\"", "only with admin_http"),
        (
            "admin_http = \"localhost\"\nadmin_token_file = \"/t\"",
            "ADDR:PORT",
        ),
    ] {
        let e = load(top).err().unwrap().to_string();
        assert!(e.contains(says), "{top}: {e}");
    }
}

#[test]
fn rbd_lun_specs() {
    let s: LunSpec = "rbd:rbd/lun0".parse().unwrap();
    assert_eq!(
        s.backend,
        BackendSpec::Rbd(RbdSpec {
            pool: "rbd".into(),
            image: "lun0".into(),
            conf: None,
            client_id: None,
            keyring: None,
            timeout_secs: None,
            reconnect: false,
            shared_pr: false,
        })
    );
    // A snapshot, read-only (docs/snapshots.md): shown as it was given.
    let s: LunSpec = "rbd:rbd/lun0@nightly,ro".parse().unwrap();
    assert!(matches!(&s.backend, BackendSpec::Rbd(r) if r.image == "lun0@nightly"));
    assert!(s.read_only);
    assert_eq!(s.to_string(), "rbd:rbd/lun0@nightly,ro");
    let s: LunSpec = "rbd:rbd/lun0,timeout=5".parse().unwrap();
    assert!(matches!(s.backend, BackendSpec::Rbd(r) if r.timeout_secs == Some(5)));
    assert!(s.thin, "an RBD image is thin by nature");
    let s: LunSpec = "rbd:pool1/img,conf=/etc/ceph/c.conf,id=iscsi,keyring=/k,bs=4096,ro"
        .parse()
        .unwrap();
    let BackendSpec::Rbd(r) = &s.backend else {
        panic!("{s:?}")
    };
    assert_eq!(r.conf.as_deref(), Some(Path::new("/etc/ceph/c.conf")));
    assert_eq!(r.client_id.as_deref(), Some("iscsi"));
    assert_eq!(r.keyring.as_deref(), Some(Path::new("/k")));
    assert_eq!((s.block_size, s.read_only), (4096, true));
    // Reconnecting after a blocklist undoes a fence: only when asked.
    assert!(!r.reconnect, "off unless given");
    assert!(!r.shared_pr, "reservations are local unless pr=rados");
    for (spec, shared) in [("rbd:rbd/a,pr=rados", true), ("rbd:rbd/a,pr=local", false)] {
        let s: LunSpec = spec.parse().unwrap();
        assert!(
            matches!(s.backend, BackendSpec::Rbd(r) if r.shared_pr == shared),
            "{spec}"
        );
    }
    for (spec, on) in [
        ("rbd:rbd/lun0,reconnect=on", true),
        ("rbd:rbd/lun0,reconnect=off", false),
        ("rbd:rbd/lun0,reconnect=yes", true),
    ] {
        let s: LunSpec = spec.parse().unwrap();
        assert!(
            matches!(s.backend, BackendSpec::Rbd(r) if r.reconnect == on),
            "{spec}"
        );
    }
}

#[test]
fn a_file_snapshot_is_served_only_read_only() {
    let problem = |spec: &str| spec.parse::<LunSpec>().unwrap_err().problem.to_string();
    assert!(
        problem("file:/srv/lun0.img.snapshots/daily")
            .contains("a snapshot is served read-only: add ,ro"),
        "{}",
        problem("file:/srv/lun0.img.snapshots/daily")
    );
    for ok in [
        "file:/srv/lun0.img.snapshots/daily,ro",
        "file:/srv/lun0.img",
        "file:/srv/.snapshots/x",
    ] {
        assert!(ok.parse::<LunSpec>().is_ok(), "{ok}");
    }
}

#[test]
fn rbd_lun_spec_mistakes_say_what_is_wrong() {
    let problem = |spec: &str| spec.parse::<LunSpec>().unwrap_err().problem.to_string();
    for (bad, says) in [
        ("rbd:", "missing POOL/IMAGE after 'rbd:'"),
        ("rbd:lun0", "rbd:lun0: expected POOL/IMAGE"),
        ("rbd:/lun0", "expected POOL/IMAGE"),
        ("rbd:rbd/", "expected POOL/IMAGE"),
        ("rbd:rbd/ns/lun0", "no namespace"),
        (
            "rbd:rbd/lun0@snap",
            "rbd:rbd/lun0@snap: a snapshot is served read-only: add ,ro",
        ),
        (
            "rbd:rbd/lun0@../x,ro",
            "snapshot name \"../x\": '/' is not allowed",
        ),
        ("rbd:rbd/lun0@a@b,ro", "'@' is not allowed"),
        (
            "rbd:rbd/@s,ro",
            "expected POOL/IMAGE or POOL/IMAGE@SNAPSHOT",
        ),
        ("rbd:rbd/lun0,size=1G", "rbd takes its size from the image"),
        ("rbd:rbd/lun0,direct", "(direct)"),
        ("rbd:rbd/lun0,prealloc", "(prealloc)"),
        ("rbd:rbd/lun0,id=", "id= is empty"),
        ("rbd:rbd/lun0,conf=", "conf= is empty"),
        ("rbd:rbd/lun0,user=x", "unknown option 'user=x'"),
        ("rbd:rbd/lun0,bs=1024", "bs=1024 (must be 512 or 4096)"),
        ("rbd:rbd/lun0,timeout=0", "timeout=0 (seconds, 1 to 3600)"),
        ("rbd:rbd/lun0,timeout=2h", "timeout=2h"),
        ("ram:1G,timeout=5", "timeout= is an rbd option"),
        ("ram:1G,conf=/c", "conf= is an rbd option"),
        ("file:/x,id=a", "id= is an rbd option"),
        ("block:/dev/x,keyring=/k", "keyring= is an rbd option"),
        (
            "rbd:rbd/lun0,reconnect=maybe",
            "reconnect=maybe (on or off)",
        ),
        ("rbd:rbd/lun0,reconnect", "unknown option 'reconnect'"),
        ("file:/x,reconnect=on", "reconnect= is an rbd option"),
        ("rbd:rbd/a,pr=shared", "pr=shared (local or rados)"),
        ("ram:1M,pr=rados", "pr= is an rbd option"),
    ] {
        let got = problem(bad);
        assert!(got.contains(says), "{bad}: {got}");
    }
    let e = "rbd:lun0".parse::<LunSpec>().unwrap_err().to_string();
    assert!(e.starts_with("LUN 'rbd:lun0': "), "{e}");
}

#[test]
fn an_rbd_image_serves_one_lun_only() {
    // The same pool/image twice, whatever reaches it: another conf=,
    // id= or keyring= is still the same image on the same cluster.
    let lun = |n: u16, spec: &str| format!("[[target.lun]]\nnumber = {n}\nspec = \"{spec}\"\n");
    let other = TARGET.replace("test:t", "test:u");
    let text = format!(
        "{TARGET}{}{other}{}",
        lun(2, "rbd:rbd/disk,conf=/etc/ceph/a.conf"),
        lun(0, "rbd:rbd/disk,conf=/etc/ceph/b.conf,id=iscsi")
    );
    let (m, _) = text_error(&text);
    mentions(
        &m,
        "target iqn.2026-11.test:u LUN 0: RBD image rbd/disk is already the store of target iqn.2026-11.test:t LUN 2",
    );
    let same = format!(
        "{TARGET}{}{}",
        lun(0, "rbd:rbd/disk"),
        lun(1, "rbd:rbd/disk,ro")
    );
    let (m, _) = text_error(&same);
    mentions(
        &m,
        "LUN 1: RBD image rbd/disk is already the store of target iqn.2026-11.test:t LUN 0",
    );
    // Another image, another pool, or another case (Ceph's names are
    // case-sensitive) are other stores.
    let fine = format!(
        "{TARGET}{}{}{}{}",
        lun(0, "rbd:rbd/disk"),
        lun(1, "rbd:rbd/disk2"),
        lun(2, "rbd:other/disk"),
        lun(3, "rbd:rbd/Disk")
    );
    Config::from_toml(&fine, None).unwrap();
}

#[test]
fn flags_refuse_two_luns_on_one_store() {
    let (m, _) = flags_error(Overrides {
        luns: vec!["rbd:rbd/disk".into(), "rbd:rbd/disk,id=other".into()],
        ..Overrides::default()
    });
    mentions(
        &m,
        "LUN 1: RBD image rbd/disk is already the store of target",
    );
    mentions(&m, "LUN 0");
    let (m, _) = flags_error(Overrides {
        luns: vec!["file:/srv/a.img".into(), "file:/srv/a.img,ro".into()],
        ..Overrides::default()
    });
    mentions(&m, "LUN 1: /srv/a.img is already the store of target");
}

#[test]
fn rbd_luns_in_the_file_form() {
    let text = r#"
[[target]]
name = "iqn.2026-11.test:rbd"
[[target.lun]]
spec = "rbd:rbd/lun0,conf=/tmp/ceph.conf,id=admin"
[[target.lun]]
spec = "rbd:rbd/lun1,bs=4096,reconnect=on"
"#;
    let c = Config::from_toml(text, None).unwrap();
    let luns = &c.targets[0].luns;
    assert!(
        matches!(&luns[0].spec.backend, BackendSpec::Rbd(r) if r.image == "lun0"
        && r.conf.as_deref() == Some(Path::new("/tmp/ceph.conf")) && !r.reconnect)
    );
    assert!(matches!(&luns[1].spec.backend, BackendSpec::Rbd(r) if r.reconnect));
    assert_eq!(luns[1].spec.block_size, 4096);
    let bad = text.replace("rbd:rbd/lun1", "rbd:lun1");
    let e = Config::from_toml(&bad, None).unwrap_err().to_string();
    assert!(
        e.contains("target iqn.2026-11.test:rbd lun[1]") && e.contains("expected POOL/IMAGE"),
        "{e}"
    );
}

/// `[target.alua]`: the layout, the defaults of ports and relative port,
/// and each mistake named with its key.
#[test]
fn alua_in_the_file_form() {
    use ironlun_scsi::{AccessState, AluaMode};
    let text = |alua: &str| format!("{TARGET}portal_group_tag = 2\n{alua}{LUN}");
    let c = Config::from_toml(
        &text(
            r#"[target.alua]
mode = "both"
local_group = 20
transition_time = 15
groups = [
  { id = 10, state = "active/optimized", preferred = true },
  { id = 20, state = "standby" },
  { id = 30, state = "unavailable", ports = [7, 8] },
]
"#,
        ),
        None,
    )
    .unwrap();
    let t = &c.targets[0];
    assert_eq!(t.relative_port, 2, "the portal group tag by default");
    let a = &t.alua;
    assert_eq!(
        (a.mode, a.local_group, a.transition_time),
        (AluaMode::Both, 20, 15)
    );
    let g: Vec<_> = a
        .groups
        .iter()
        .map(|g| (g.id, g.ports.clone(), g.state, g.preferred))
        .collect();
    assert_eq!(
        g,
        vec![
            // Without `ports`: the group's id, and this gateway's port for
            // the local group.
            (10, vec![10], AccessState::ActiveOptimized, true),
            (20, vec![2], AccessState::Standby, false),
            (30, vec![7, 8], AccessState::Unavailable, false),
        ]
    );
    // Tables of tables, and a relative port of its own.
    let c = Config::from_toml(
        &text(
            "[target.alua]\nmode = \"implicit\"\nlocal_group = 1\nrelative_port = 9\n[[target.alua.groups]]\nid = 1\nstate = \"active/non-optimized\"\n",
        ),
        None,
    )
    .unwrap();
    assert_eq!(c.targets[0].relative_port, 9);
    assert_eq!(c.targets[0].alua.groups[0].ports, vec![9]);
    // Off (or no table): no ALUA, the port as before.
    for off in ["", "[target.alua]\nmode = \"off\"\n"] {
        let c = Config::from_toml(&text(off), None).unwrap();
        assert_eq!(c.targets[0].alua, ironlun_scsi::AluaConfig::default());
        assert_eq!(c.targets[0].relative_port, 2);
    }
    let key = "target iqn.2026-11.test:t alua";
    for (alua, says) in [
        ("[target.alua]\nlocal_group = 1\n", "alua.mode: missing"),
        ("[target.alua]\nmode = \"on\"\n", "alua.mode: ALUA mode \"on\""),
        ("[target.alua]\nmode = \"implicit\"\n", "alua.local_group: missing"),
        (
            "[target.alua]\nmode = \"implicit\"\nlocal_group = 1\ngroups = [{ id = 1, state = \"optimized\" }]\n",
            "alua.groups[0].state: ALUA state \"optimized\"",
        ),
        (
            "[target.alua]\nmode = \"implicit\"\nlocal_group = 1\ngroups = [{ id = 2, state = \"standby\" }]\n",
            "alua: the local group 1 is not listed",
        ),
        (
            "[target.alua]\nmode = \"implicit\"\nlocal_group = 1\ngroups = [{ id = 1, state = \"standby\" }, { id = 3, state = \"standby\", ports = [2] }]\n",
            "alua: relative port 2 is in two target port groups",
        ),
        (
            "[target.alua]\nmode = \"implicit\"\nlocal_group = 1\nrelative_port = 0\n",
            "alua.relative_port: 0 is reserved",
        ),
    ] {
        let (m, e) = text_error(&text(alua));
        assert!(matches!(e, ConfigError::Invalid { .. }), "{m}");
        mentions(&m, &format!("{key}{}", says.strip_prefix("alua").unwrap()));
    }
    let (m, _) = text_error(&text("[target.alua]\nmode = \"implicit\"\nlocal = 1\n"));
    mentions(&m, "unknown field `local`");
}

/// docs/ha.md's gateway configuration checks, and says what the page says.
#[test]
fn the_ha_example_parses() {
    use ironlun_scsi::{AccessState, AluaMode};
    let doc = include_str!("../../../docs/ha.md");
    let start = doc.find("```toml\n").unwrap() + 8;
    let end = start + doc[start..].find("```").unwrap();
    let c = Config::from_toml(&doc[start..end], None).unwrap();
    let t = &c.targets[0];
    assert_eq!(
        (t.alua.mode, t.alua.local_group, t.relative_port),
        (AluaMode::Implicit, 1, 1)
    );
    assert_eq!(t.alua.groups[0].state, AccessState::ActiveOptimized);
    assert_eq!(t.alua.groups[1].ports, vec![2]);
    // The second gateway's, as the page says to write it.
    let second = doc[start..end]
        .replace("portal_group_tag = 1", "portal_group_tag = 2")
        .replace("local_group = 1", "local_group = 2");
    let c = Config::from_toml(&second, None).unwrap();
    assert_eq!(
        (
            c.targets[0].relative_port,
            c.targets[0].alua.groups[1].ports.clone()
        ),
        (2, vec![2])
    );
}

/// Each offered key of the table, written under its file name in
/// `[defaults]` and overridden in `[target.params]`, reaches the
/// target's offers, and `--check`'s effective TOML shows it under the
/// same name and loads back to the same offers.
#[test]
fn every_offered_key_round_trips_through_the_file() {
    use ironlun_proto::keys::Value;
    use ironlun_proto::offers::{OfferKind, Offers, OFFER_KEYS};
    for k in OFFER_KEYS {
        // (file text, the value it gives) for the defaults and the target.
        let (under, over) = match k.kind {
            OfferKind::Digests => (
                ("[\"CRC32C\", \"None\"]", Value::Text("CRC32C,None".into())),
                ("[\"CRC32C\"]", Value::Text("CRC32C".into())),
            ),
            OfferKind::Bool => {
                let v = !(k.get)(&Offers::default()).as_bool().unwrap();
                (
                    (if v { "false" } else { "true" }, Value::Bool(!v)),
                    (if v { "true" } else { "false" }, Value::Bool(v)),
                )
            }
            OfferKind::U16 if k.field == "max_connections" => {
                (("1", Value::Number(1)), ("1", Value::Number(1)))
            }
            OfferKind::U16 => (("3", Value::Number(3)), ("5", Value::Number(5))),
            // Above the default FirstBurstLength, which must not exceed it.
            OfferKind::Bytes if k.field == "max_burst_length" => (
                ("2097152", Value::Number(2 << 20)),
                ("4194304", Value::Number(4 << 20)),
            ),
            OfferKind::Bytes => (
                ("8192", Value::Number(8192)),
                ("16384", Value::Number(16384)),
            ),
        };
        let f = k.field;
        let only_defaults = format!("[defaults]\n{f} = {}\n{TARGET}{LUN}", under.0);
        let c = Config::from_toml(&only_defaults, None).unwrap();
        assert_eq!((k.get)(&c.targets[0].offers), under.1, "{f}: [defaults]");
        let both = format!(
            "[defaults]\n{f} = {}\n{TARGET}[target.params]\n{f} = {}\n{LUN}",
            under.0, over.0
        );
        let c = Config::from_toml(&both, None).unwrap();
        let offers = &c.targets[0].offers;
        assert_eq!((k.get)(offers), over.1, "{f}: [target.params]");
        let text = c.effective_toml(&Overrides::default(), None);
        assert!(
            text.contains(&format!("\n{f} = {}\n", over.0)),
            "{f}: {text}"
        );
        let again = Config::from_toml(&text, None).unwrap();
        assert_eq!(&again.targets[0].offers, offers, "{f}: loaded back");
    }
    let (m, _) = file_error(&format!("{TARGET}[target.params]\nmax_burst = 1\n{LUN}"));
    mentions(
        &m,
        "unknown field `max_burst`, expected one of `queue_depth`, `header_digest`",
    );
}
