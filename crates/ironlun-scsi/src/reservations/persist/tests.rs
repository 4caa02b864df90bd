//! The saved form: round trips, the line-injection attack, and what the
//! strict reader refuses.

use super::*;

const ISID: [u8; 6] = [0x80, 0, 0, 0, 0, 1];

fn registered(name: &str, key: u64) -> Registration {
    Registration {
        nexus: ItNexus::new(name, ISID, 1),
        key,
        all_tg_pt: false,
    }
}

fn state(registrations: Vec<Registration>, reservation: Option<Reservation>) -> PrState {
    PrState {
        generation: 7,
        registrations,
        reservation,
        aptpl: true,
    }
}

#[test]
fn state_round_trips_through_text() {
    let a = ItNexus::new("iqn.2026-11.test:a", [1, 2, 3, 4, 5, 6], 1);
    let st = state(
        vec![
            Registration {
                nexus: a.clone(),
                key: 0xdead,
                all_tg_pt: true,
            },
            registered("iqn.2026-11.test:b", u64::MAX),
        ],
        Some(Reservation {
            holder: a,
            pr_type: pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY,
        }),
    );
    let text = st.encode();
    assert!(
        text.starts_with("ironlun-pr 2\n") && text.ends_with("\nend\n"),
        "{text}"
    );
    assert_eq!(PrState::decode(&text), Ok(st));
    let empty = state(Vec::new(), None);
    assert_eq!(PrState::decode(&empty.encode()), Ok(empty));
}

/// The attack of issue 36: a name holding a line end and a `reserve`
/// record, registered with APTPL. Saved and read back it is one name of
/// one registration: no reservation appears.
#[test]
fn a_name_with_a_line_end_stays_one_field() {
    let victim = ItNexus::new("iqn.2026-11.test:victim", ISID, 1);
    let evil = format!(
        "iqn.2026-11.test:evil\nreserve 3 1 {}\nregister 0000000000000001 0 1 {} ",
        victim.initiator_port, victim.initiator_port
    );
    let st = state(vec![registered(&evil, 0xaa)], None);
    let text = st.encode();
    assert_eq!(
        text.lines().count(),
        4,
        "magic, generation, register, end: {text}"
    );
    let back = PrState::decode(&text).unwrap();
    assert_eq!(back, st);
    assert_eq!(back.reservation, None);
    assert_eq!(back.registrations.len(), 1);
    assert_eq!(
        back.registrations[0].nexus.initiator_port,
        format!("{evil},i,0x800000000001")
    );
    // Control characters, spaces, '%' and UTF-8 all come back as they were.
    let odd = "iqn.2026-11.test:a b\t%25\r\u{1b}[31m\u{e9}";
    let st = state(vec![registered(odd, 1)], None);
    assert_eq!(PrState::decode(&st.encode()), Ok(st));
}

/// What version 1 wrote for the attack above: refused, since its names
/// are not plain initiator port names.
#[test]
fn a_forged_version_1_file_is_refused() {
    let forged = "ironlun-pr 1\ngeneration 3\n\
        register 00000000000000aa 0 1 iqn.2026-11.test:evil\n\
        reserve 3 1 iqn.2026-11.test:victim,i,0x800000000001 ,i,0x800000000001\n";
    assert!(PrState::decode(forged).is_err());
    // The same with a name holding a space or a control character.
    for name in ["iqn.2026-11.test:a b", "iqn.2026-11.test:a\u{7}"] {
        let text = format!(
            "ironlun-pr 1\ngeneration 3\nregister 00000000000000aa 0 1 {name},i,0x800000000001\n"
        );
        assert!(PrState::decode(&text).is_err(), "{text:?}");
    }
    // A version 1 file of plain names is read (the upgrade); saved again
    // it is version 2.
    let v1 = "ironlun-pr 1\ngeneration 3\n\
        register 00000000000000aa 0 1 iqn.2026-11.test:a,i,0x800000000001\n\
        reserve 1 1 iqn.2026-11.test:a,i,0x800000000001\n";
    let st = PrState::decode(v1).unwrap();
    assert_eq!(st.registrations.len(), 1);
    assert_eq!(st.reservation.as_ref().map(|r| r.pr_type), Some(1));
    assert!(st.encode().starts_with("ironlun-pr 2\n"));
}

#[test]
fn the_reader_refuses_what_the_writer_never_writes() {
    let good = state(vec![registered("iqn.2026-11.test:a", 5)], None).encode();
    assert!(PrState::decode(&good).is_ok());
    let port = "iqn.2026-11.test:a,i,0x800000000001";
    let cases = [
        "",
        "garbage\n",
        "ironlun-pr 2\n",
        "ironlun-pr 2\ngeneration 1\n",
        "ironlun-pr 2\ngeneration 1\nend",
        "ironlun-pr 2\ngeneration 1\nend\nend\n",
        "ironlun-pr 2\ngeneration 1\nend\n\n",
        "ironlun-pr 2\ngeneration 01\nend\n",
        "ironlun-pr 2\ngeneration +1\nend\n",
        "ironlun-pr 2\ngeneration 4294967296\nend\n",
        "ironlun-pr 2\ngeneration 1\r\nend\n",
        "ironlun-pr 2\ngeneration 1\ngeneration 1\nend\n",
        "ironlun-pr 2\ngeneration 1\n\nend\n",
        "ironlun-pr 2\ngeneration 1\nunknown\nend\n",
        "ironlun-pr 2\nend\n",
    ];
    for text in cases {
        assert!(PrState::decode(text).is_err(), "{text:?}");
    }
    let records = [
        // Key: zero, upper case, short, long.
        format!("register 0000000000000000 0 1 {port}"),
        format!("register 00000000000000AA 0 1 {port}"),
        format!("register aa 0 1 {port}"),
        format!("register 000000000000000aa 0 1 {port}"),
        // ALL_TG_PT, relative port.
        format!("register 00000000000000aa 2 1 {port}"),
        format!("register 00000000000000aa 0 65536 {port}"),
        format!("register 00000000000000aa 0 -1 {port}"),
        // Names: not a port name, upper case, escapes not needed or
        // upper-case, NUL, a raw control character, too long, missing,
        // trailing fields.
        "register 00000000000000aa 0 1 iqn.2026-11.test:a".to_owned(),
        "register 00000000000000aa 0 1 IQN.2026-11.test:a,i,0x800000000001".to_owned(),
        "register 00000000000000aa 0 1 iqn.2026-11.test:a,i,0x80000000000".to_owned(),
        "register 00000000000000aa 0 1 iqn.2026-11.test:%61,i,0x800000000001".to_owned(),
        "register 00000000000000aa 0 1 iqn.2026-11.test:%0A,i,0x800000000001".to_owned(),
        "register 00000000000000aa 0 1 iqn.2026-11.test:%00,i,0x800000000001".to_owned(),
        "register 00000000000000aa 0 1 iqn.2026-11.test:%ff,i,0x800000000001".to_owned(),
        "register 00000000000000aa 0 1 iqn.2026-11.test:\u{7},i,0x800000000001".to_owned(),
        format!("register 00000000000000aa 0 1 {},i,0x800000000001", "a".repeat(224)),
        "register 00000000000000aa 0 1".to_owned(),
        "register 00000000000000aa 0 1 ".to_owned(),
        format!("register 00000000000000aa 0 1 {port} x"),
        format!("register 00000000000000aa 0  1 {port}"),
        // Reservations: a type that does not exist, a holder that is not
        // registered, two reservations, a registration after it.
        format!("register 00000000000000aa 0 1 {port}\nreserve 2 1 {port}"),
        format!("register 00000000000000aa 0 1 {port}\nreserve 1 2 {port}"),
        format!("reserve 1 1 {port}"),
        format!("reserve 7 1 {port}"),
        format!("register 00000000000000aa 0 1 {port}\nreserve 1 1 {port}\nreserve 1 1 {port}"),
        format!("register 00000000000000aa 0 1 {port}\nreserve 1 1 {port}\nregister 00000000000000bb 0 2 {port}"),
        // A second registration of one nexus, directly or through
        // ALL_TG_PT.
        format!("register 00000000000000aa 0 1 {port}\nregister 00000000000000bb 0 1 {port}"),
        format!("register 00000000000000aa 1 1 {port}\nregister 00000000000000bb 0 2 {port}"),
    ];
    for r in &records {
        let text = format!("ironlun-pr 2\ngeneration 1\n{r}\nend\n");
        assert!(PrState::decode(&text).is_err(), "{text:?}");
    }
    // The same nexus at two relative ports is two registrations.
    let two = format!(
        "ironlun-pr 2\ngeneration 1\nregister 00000000000000aa 0 1 {port}\nregister 00000000000000bb 0 2 {port}\nend\n"
    );
    assert_eq!(PrState::decode(&two).unwrap().registrations.len(), 2);
}

#[test]
fn size_and_count_are_bounded() {
    let many: Vec<Registration> = (0..=MAX_REGISTRATIONS as u64)
        .map(|i| Registration {
            nexus: ItNexus::new(
                &"\n".repeat(MAX_ISCSI_NAME_BYTES),
                (i << 16).to_be_bytes()[2..].try_into().unwrap(),
                1,
            ),
            key: i + 1,
            all_tg_pt: false,
        })
        .collect();
    let full = state(many[..MAX_REGISTRATIONS].to_vec(), None);
    let text = full.encode();
    assert!(
        text.len() <= MAX_STATE_BYTES,
        "{} > {MAX_STATE_BYTES}",
        text.len()
    );
    assert_eq!(PrState::decode(&text), Ok(full));
    let over = state(many, None).encode();
    assert!(PrState::decode(&over)
        .unwrap_err()
        .contains("more registrations"));
    let long = format!(
        "{good}{}",
        " ".repeat(MAX_STATE_BYTES),
        good = "ironlun-pr 2\n"
    );
    assert!(PrState::decode(&long).unwrap_err().contains("longer than"));
}
