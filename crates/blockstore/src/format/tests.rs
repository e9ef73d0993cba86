use super::*;

fn header(id: u64, group: u64, index: u32, count: u32, stored: &[u8]) -> BlockHeader {
    BlockHeader {
        flags: if index + 1 == count { FLAG_LAST_IN_GROUP } else { 0 },
        codec: Codec::None,
        id: BlockId(id),
        group: GroupId(group),
        version: GroupId(group),
        stored_len: stored.len() as u32,
        raw_len: stored.len() as u32,
        index,
        count,
        remote: None,
    }
}

#[test]
fn a_block_round_trips_and_is_padded_to_the_alignment() {
    let payload = b"hello block store";
    let h = header(7, 3, 1, 2, payload);
    let mut out = Vec::new();
    encode_block(&mut out, &h, payload);
    assert_eq!(out.len() as u64, h.footprint());
    assert_eq!(out.len() as u64 % BLOCK_ALIGN, 0);
    let decoded = decode_header(&out).expect("decodes");
    assert_eq!(decoded, h);
    assert!(decoded.is_last());
    verify_block(&out[..BLOCK_HEADER_BYTES], &out[BLOCK_HEADER_BYTES..][..payload.len()])
        .expect("checksum");
}

#[test]
fn zeroes_are_the_end_and_never_a_block() {
    assert_eq!(decode_header(&[0u8; 64]), Err(HeaderProblem::Zero));
    assert!(matches!(decode_header(&[0u8; 10]), Err(HeaderProblem::Invalid(_))));
}

#[test]
fn every_flipped_bit_of_a_block_is_caught() {
    let payload: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    let h = header(99, 12, 0, 1, &payload);
    let mut block = Vec::new();
    encode_block(&mut block, &h, &payload);
    let used = BLOCK_HEADER_BYTES + payload.len();
    for byte in 0..used {
        for bit in 0..8 {
            let mut damaged = block.clone();
            damaged[byte] ^= 1 << bit;
            let caught = match decode_header(&damaged) {
                Err(_) => true,
                Ok(decoded) => {
                    decoded.stored_len != h.stored_len
                        || verify_block(
                            &damaged[..BLOCK_HEADER_BYTES],
                            &damaged[BLOCK_HEADER_BYTES..used],
                        )
                        .is_err()
                }
            };
            assert!(caught, "a flip of bit {bit} of byte {byte} went unnoticed");
        }
    }
}

#[test]
fn compression_round_trips_and_falls_back_when_it_does_not_pay() {
    let text = b"abcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcd".repeat(64);
    for codec in [Codec::Lz4, Codec::Zstd] {
        let (used, stored) = compress(codec, &text);
        assert_eq!(used, codec);
        assert!(stored.len() < text.len());
        assert_eq!(decompress(used, &stored, text.len()).expect("decompresses"), text);
        // A wrong raw length is an error, not a short or padded result.
        assert!(decompress(used, &stored, text.len() + 1).is_err());
    }
    let noise: Vec<u8> = (0..512).map(|_| fastrand::u8(..)).collect();
    let (used, stored) = compress(Codec::Lz4, &noise);
    assert_eq!(used, Codec::None);
    assert_eq!(stored, noise);
}

#[test]
fn headers_that_break_the_rules_are_rejected() {
    let payload = b"x";
    let mut good = Vec::new();
    encode_block(&mut good, &header(1, 5, 0, 1, payload), payload);
    let cases: [(usize, u8, &str); 5] = [
        (4, 9, "version"),
        (5, 0x80, "flags"),
        (6, 7, "codec"),
        (7, 1, "reserved"),
        (50, 1, "reserved tail"),
    ];
    for (at, value, what) in cases {
        let mut bad = good.clone();
        bad[at] = value;
        assert!(decode_header(&bad).is_err(), "{what} accepted");
    }
    // A length over the limit.
    let mut bad = good.clone();
    bad[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_header(&bad).is_err());
}

#[test]
fn segment_and_map_headers_round_trip_and_reject_damage() {
    let seg = SegmentHeader { number: 42, capacity: 1 << 20, stream: 1 };
    let bytes = encode_segment_header(&seg);
    assert_eq!(bytes.len() as u64, BLOCKS_START);
    assert_eq!(decode_segment_header(&bytes), Ok(seg));
    let mut bad = bytes.clone();
    bad[20] ^= 1;
    assert!(decode_segment_header(&bad).is_err());

    let entries = vec![
        (
            BlockId(3),
            Location { segment: 1, offset: 4096, version: GroupId(2), stored_len: 10, raw_len: 10 },
        ),
        (
            BlockId(9),
            Location { segment: 2, offset: 8192, version: GroupId(4), stored_len: 5, raw_len: 20 },
        ),
    ];
    let head =
        MapHeader { sequence: 3, scan: [(2, 8256), (0, 0)], next_group: GroupId(5), entries: 2 };
    let map = encode_map(&head, &entries);
    assert_eq!(decode_map(&map), Ok((head, entries)));
    for at in [0, 17, 45, 100, map.len() - 1] {
        let mut bad = map.clone();
        bad[at] ^= 0x10;
        assert!(decode_map(&bad).is_err(), "a flip at {at} went unnoticed");
    }
    assert!(decode_map(&map[..map.len() - 3]).is_err());
}

#[test]
fn file_names_parse_back() {
    assert_eq!(parse_segment_file_name(&segment_file_name(0xabc)), Some(0xabc));
    assert_eq!(parse_map_file_name(&map_file_name(7)), Some(7));
    assert_eq!(parse_segment_file_name("00000000000000zz.blk"), None);
    assert_eq!(parse_segment_file_name("1.blk"), None);
    assert_eq!(parse_map_file_name(&segment_file_name(1)), None);
}

#[test]
fn short_inputs_are_errors_not_panics() {
    assert!(verify_block(&[0u8; 10], b"").is_err());
    assert!(decode_segment_header(&[0u8; 3]).is_err());
    assert!(decode_map(&[0u8; 3]).is_err());
    assert!(decode_doublewrite_header(&[0u8; 3]).is_err());
}

#[test]
fn a_pointer_round_trips_without_a_payload_and_names_its_block() {
    let payload = vec![7u8; 5000];
    let block = header(42, 9, 0, 2, &payload);
    let mut remote = Vec::new();
    encode_block(&mut remote, &block, &payload);
    let crc = u32_at(&remote, BLOCK_HEADER_BYTES - 4);
    let pointer = BlockHeader {
        flags: block.flags | FLAG_REMOTE,
        remote: Some(RemoteRef { segment: 3, offset: 8192, crc }),
        ..block
    };
    let mut out = Vec::new();
    encode_block(&mut out, &pointer, &[]);
    assert_eq!(out.len(), BLOCK_HEADER_BYTES, "a pointer is one header, no payload");
    assert_eq!(pointer.footprint(), BLOCK_HEADER_BYTES as u64);
    let decoded = decode_header(&out).expect("decodes");
    assert_eq!(decoded, pointer);
    assert_eq!(decoded.payload_len(), 0);
    assert_eq!(decoded.pointee(), block);
    verify_block(&out, &[]).expect("checksum");
    // Every flipped bit of the pointer is caught, the reference included.
    for byte in 0..BLOCK_HEADER_BYTES {
        for bit in 0..8 {
            let mut damaged = out.clone();
            damaged[byte] ^= 1 << bit;
            let caught = match decode_header(&damaged) {
                Err(_) => true,
                Ok(h) => h.payload_len() != 0 || verify_block(&damaged, &[]).is_err(),
            };
            assert!(caught, "a flip of bit {bit} of pointer byte {byte} went unnoticed");
        }
    }
}

#[test]
fn pointers_that_cannot_be_valid_do_not_decode() {
    let block = header(1, 5, 0, 1, &[]);
    let tombstone_pointer = BlockHeader {
        flags: block.flags | FLAG_REMOTE | FLAG_TOMBSTONE,
        remote: Some(RemoteRef { segment: 1, offset: BLOCKS_START, crc: 0 }),
        ..block
    };
    let mut out = Vec::new();
    encode_block(&mut out, &tombstone_pointer, &[]);
    assert!(matches!(decode_header(&out), Err(HeaderProblem::Invalid(_))));
    let into_the_header = BlockHeader {
        flags: block.flags | FLAG_REMOTE,
        remote: Some(RemoteRef { segment: 1, offset: 64, crc: 0 }),
        ..block
    };
    let mut out = Vec::new();
    encode_block(&mut out, &into_the_header, &[]);
    assert!(matches!(decode_header(&out), Err(HeaderProblem::Invalid(_))));
    assert!(!RemoteRef::representable(1 << 33, 0));
    assert!(!RemoteRef::representable(1, 100));
}

#[test]
fn the_block_checksum_is_crc32c_of_header_then_payload() {
    // The checksum of the header and the payload as one buffer (tierkv-io pins CRC-32C
    // itself against its bit-by-bit definition); lengths cover the short-buffer and the
    // folded paths.
    for len in [0usize, 1, 7, 63, 64, 255, 4032, 16320, 100_000] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 131 + 7) as u8).collect();
        let head: Vec<u8> = (0..BLOCK_CRC_OFFSET).map(|i| i as u8).collect();
        let expected = tierkv_io::crc32c(&[head.as_slice(), &payload].concat());
        assert_eq!(block_crc(&head, &payload), expected, "{len} bytes");
    }
    assert_eq!(block_crc(b"123456789", b""), 0xe306_9283, "the CRC-32C check value");
}

#[test]
fn a_chain_mark_decodes_only_in_its_one_form() {
    let decode = |h: &BlockHeader, payload: &[u8]| {
        let mut out = Vec::new();
        encode_block(&mut out, h, payload);
        decode_header(&out)
    };
    // The first piece's mark names no earlier group; a later one names the first.
    let first = BlockHeader { flags: FLAG_LAST_IN_GROUP | FLAG_CHAIN, ..header(0, 9, 2, 3, b"") };
    assert_eq!(decode(&first, b"").expect("decodes").chain(), Some((GroupId(9), false)));
    let end = BlockHeader { flags: first.flags | FLAG_CHAIN_END, id: BlockId(4), ..first };
    assert_eq!(decode(&end, b"").expect("decodes").chain(), Some((GroupId(4), true)));
    assert_eq!(header(4, 9, 0, 1, b"x").chain(), None, "a block is no mark");
    let bad = [
        BlockHeader { flags: FLAG_LAST_IN_GROUP | FLAG_CHAIN_END, ..first },
        BlockHeader { flags: FLAG_CHAIN, ..header(0, 9, 1, 3, b"") },
        BlockHeader { flags: first.flags | FLAG_TOMBSTONE, ..first },
        BlockHeader { id: BlockId(9), ..end },
        BlockHeader { version: GroupId(8), ..end },
    ];
    for h in &bad {
        assert!(matches!(decode(h, b""), Err(HeaderProblem::Invalid(_))), "{h:?}");
    }
    let payload = BlockHeader { stored_len: 1, raw_len: 1, ..first };
    assert!(matches!(decode(&payload, b"x"), Err(HeaderProblem::Invalid(_))));
}
