//! What the device tests share: a RAM LU with a test configuration, and
//! commands in, status, sense and data out.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ironlun_backend::testing::FaultyBackend;
use ironlun_backend::{Backend, RamBackend};

use crate::{DataOutBuffer, ItNexus, LogicalUnit, LuConfig, LunMap, NexusId, Response};
use crate::{SoftThreshold, ThresholdEvent, ThresholdNotify};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

pub(crate) const N: NexusId = NexusId(1);

pub(crate) fn id(name: &str) -> ItNexus {
    ItNexus::new(
        &format!("iqn.2026-11.test:{name}"),
        [0x80, 0, 0, 0, 0, 1],
        1,
    )
}

pub(crate) fn cfg(bs: u32) -> LuConfig {
    LuConfig {
        block_size: bs,
        physical_block_size: None,
        read_only: false,
        product: "ram".into(),
        revision: "0.1".into(),
        serial: "ser123".into(),
        naa_id: 0xabcdef,
        target_name: "iqn.2026-11.test:t".into(),
        portal_group_tag: 1,
        relative_port: 1,
        alua: Default::default(),
        max_transfer_bytes: 1 << 20,
        thin: false,
        sanitize: false,
        rotation: None,
    }
}

pub(crate) fn lu_with(backend: Arc<dyn Backend>, c: LuConfig) -> LunMap {
    let lu = Arc::new(LogicalUnit::new(c, backend).unwrap());
    LunMap::new(vec![(0, lu)])
}

pub(crate) fn ram_map(blocks: u64, bs: u32) -> LunMap {
    lu_with(Arc::new(RamBackend::new(blocks * u64::from(bs))), cfg(bs))
}

/// A thin LU over RAM whose "file system" has the free space the test
/// sets ([`FaultyBackend::set_free_bytes`]), with a soft threshold whose
/// crossings are collected in `events`.
pub(crate) struct ThresholdLu {
    pub map: LunMap,
    pub backend: Arc<FaultyBackend<RamBackend>>,
    pub events: Arc<Mutex<Vec<ThresholdEvent>>>,
}

pub(crate) fn threshold_lu(bytes: u64, bs: u32, spec: SoftThreshold, free: u64) -> ThresholdLu {
    let backend = Arc::new(FaultyBackend::new(RamBackend::new(bytes)));
    backend.set_free_bytes(Some(free));
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let c = LuConfig {
        thin: true,
        ..cfg(bs)
    };
    let mut lu = LogicalUnit::new(c, backend.clone()).unwrap();
    let notify: ThresholdNotify = Box::new(move |e| seen.lock().unwrap().push(e));
    lu.set_soft_threshold(spec, Some(notify)).unwrap();
    ThresholdLu {
        map: LunMap::new(vec![(0, Arc::new(lu))]),
        backend,
        events,
    }
}

impl Response {
    /// The response's data in memory (read from the file for a file range).
    pub(crate) fn bytes(&self) -> Bytes {
        self.data.to_bytes().unwrap()
    }
}

pub(crate) fn run(m: &LunMap, cdb: &[u8]) -> Response {
    m.execute(Some(0), N, cdb, &DataOutBuffer::new())
}

pub(crate) fn run_out(m: &LunMap, cdb: &[u8], data: &[u8]) -> Response {
    m.execute(Some(0), N, cdb, &DataOutBuffer::copy_from_slice(data))
}

/// (sense key, ASC, ASCQ) of a fixed- or descriptor-format response.
pub(crate) fn sense_of(r: &Response) -> (SenseKey, u8, u8) {
    assert_eq!(
        r.status,
        Status::CHECK_CONDITION,
        "expected CHECK CONDITION"
    );
    let s = &r.sense;
    match s[0] & 0x7f {
        0x70 => (SenseKey(s[2] & 0x0f), s[12], s[13]),
        0x72 => (SenseKey(s[1] & 0x0f), s[2], s[3]),
        other => panic!("sense format {other:#x}"),
    }
}

pub(crate) fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let n = blocks.to_be_bytes();
    [opcode::READ_10, 0, l[0], l[1], l[2], l[3], 0, n[0], n[1], 0]
}

pub(crate) fn write10(lba: u32, blocks: u16, flags: u8) -> [u8; 10] {
    let mut c = read10(lba, blocks);
    c[0] = opcode::WRITE_10;
    c[1] = flags;
    c
}

pub(crate) fn cdb16(op: u8, flags: u8, lba: u64, len: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    c[1] = flags;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&len.to_be_bytes());
    c
}
