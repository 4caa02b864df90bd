//! Tests of the configuration: LUN specs, flags, the file form and the
//! messages of every kind of mistake.

use std::path::Path;

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
            direct: true,
            preallocate: true
        }
    );
    let s: LunSpec = "block:/dev/loop0".parse().unwrap();
    assert!(matches!(s.backend, BackendSpec::Block { .. }));
    let s: LunSpec = "ram:1G,pbs=4096".parse().unwrap();
    assert_eq!((s.block_size, s.physical_block_size), (512, 4096));
    assert!("ram:1G,bs=4096,pbs=512".parse::<LunSpec>().is_err());
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
        "block:/dev/x,thin",
        "file:/x,size=1G,thin,prealloc",
    ] {
        assert!(bad.parse::<LunSpec>().is_err(), "{bad} should fail");
    }
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
    validate_iscsi_name(&default_target_name()).unwrap();
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
            quickack: true
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
    let doc = include_str!("../../../../docs/config.md");
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
        "[[target]]\nname = \"iqn.x:y\"\nbogus = 1\n",
        Some(Path::new("t.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("t.toml: line "), "{e}");
    assert!(e.contains("bogus"), "{e}");
    let e = Config::from_toml(
        "[[target]]\nname = \"iqn.x:y\"\n[[target.lun]]\nspec = \"ram:1Q\"\n",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("lun[0]"), "{e}");
    let e = Config::from_toml(
        "[[target]]\nname = \"iqn.x:y\"\n[target.params]\nfirst_burst_length = 1048576\nmax_burst_length = 65536\n[[target.lun]]\nspec = \"ram:1M\"\n",
        None,
    )
    .unwrap_err().to_string();
    assert!(e.contains("FirstBurstLength"), "{e}");
    let e = Config::from_toml("[[target]]\nname = \"iqn.x:y\"\n[target.params]\nmax_burst_length = 100\n[[target.lun]]\nspec = \"ram:1M\"\n", None).unwrap_err().to_string();
    assert!(e.contains("MaxBurstLength"), "{e}");
    assert!(Config::from_toml("", None)
        .unwrap_err()
        .to_string()
        .contains("no [[target]]"));
}
