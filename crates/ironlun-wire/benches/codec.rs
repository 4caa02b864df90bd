//! PDU encode/decode and CRC32C digests: the per-command work of the
//! wire codec (`cargo bench -p ironlun-wire`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ironlun_wire::digest::crc32c;
use ironlun_wire::{
    encode_frame, DataIn, DataOut, Digests, FrameDecoder, Lun, Pdu, Residual, ScsiCommand,
};

fn read_command() -> Pdu {
    let mut cdb = [0u8; 16];
    // READ(10) of 8 blocks at LBA 0x1234.
    cdb[..10].copy_from_slice(&[0x28, 0, 0, 0, 0x12, 0x34, 0, 0, 8, 0]);
    Pdu::ScsiCommand(ScsiCommand {
        immediate: false,
        final_bit: true,
        read: true,
        write: false,
        attr: 1,
        lun: Lun::from_index(0),
        itt: 42,
        expected_data_transfer_length: 4096,
        cmd_sn: 7,
        exp_stat_sn: 9,
        cdb,
    })
}

fn data_in() -> Pdu {
    Pdu::DataIn(DataIn {
        final_bit: true,
        ack: false,
        residual: Residual::None,
        status: Some(ironlun_scsi_codes::Status::GOOD),
        lun: Lun::from_index(0),
        itt: 42,
        ttt: 0xffff_ffff,
        stat_sn: 10,
        exp_cmd_sn: 8,
        max_cmd_sn: 135,
        data_sn: 0,
        buffer_offset: 0,
    })
}

fn bhs(c: &mut Criterion) {
    let cmd = read_command().encode();
    c.bench_function("decode SCSI Command BHS", |b| {
        b.iter(|| Pdu::decode(std::hint::black_box(&cmd)).unwrap())
    });
    let pdu = data_in();
    c.bench_function("encode Data-In BHS", |b| {
        b.iter(|| std::hint::black_box(&pdu).encode())
    });
}

fn frames(c: &mut Criterion) {
    let data = vec![0x5au8; 4096];
    let mut g = c.benchmark_group("Data-Out frame 4 KiB");
    g.throughput(Throughput::Bytes(4096));
    for (name, digests) in [
        ("no digests", Digests::default()),
        (
            "header+data digests",
            Digests {
                header: true,
                data: true,
            },
        ),
    ] {
        let out = Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_index(0),
            itt: 42,
            ttt: 3,
            exp_stat_sn: 9,
            data_sn: 0,
            buffer_offset: 0,
        })
        .encode();
        let mut wire = BytesMut::new();
        encode_frame(&out, &[], &data, digests, &mut wire).unwrap();
        let wire = wire.freeze();
        g.bench_function(format!("encode, {name}"), |b| {
            let mut buf = BytesMut::with_capacity(8192);
            b.iter(|| {
                buf.clear();
                encode_frame(&out, &[], &data, digests, &mut buf).unwrap();
            })
        });
        let decoder = FrameDecoder {
            digests,
            max_data_segment_len: 262_144,
        };
        g.bench_function(format!("decode, {name}"), |b| {
            b.iter_batched(
                || BytesMut::from(&wire[..]),
                |mut buf| decoder.decode(&mut buf).unwrap().unwrap(),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn digests(c: &mut Criterion) {
    let mut g = c.benchmark_group("CRC32C");
    for len in [48usize, 4096, 65_536, 524_288] {
        let data = vec![0xa5u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("{len} bytes"), |b| {
            b.iter(|| crc32c(std::hint::black_box(&data)))
        });
    }
    g.finish();
}

criterion_group!(benches, bhs, frames, digests);
criterion_main!(benches);
