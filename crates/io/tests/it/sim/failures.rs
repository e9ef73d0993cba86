//! Failed syncs and injected faults (sections 3 and 4 of `sim.rs`'s tests).

use super::*;

// ---------------------------------------------------------------------------------------------
// 3. Failed syncs
// ---------------------------------------------------------------------------------------------

#[test]
fn data_before_a_failed_sync_never_becomes_durable() {
    let (fs, storage) = fs_with_db();
    let file = durable_file(&storage, "/db/a", AccessMethod::Syscall, &[0u8; 8192]);
    file.write_at(&[1u8; 4096], 0).unwrap();
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 1, FaultErrno::Eio)));
    let (op, errno, _) = injected(file.sync_data());
    assert_eq!((op, errno), (Op::Sync, FaultErrno::Eio));
    let failed: Vec<_> = fs.ops().into_iter().filter(|op| op.failed).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].kind, SimOpKind::Sync);

    file.write_at(&[2u8; 4096], 4096).unwrap();
    file.sync_data().unwrap();
    file.sync_data().unwrap();
    let live = fs.read_file("/db/a").unwrap();
    assert!(live[..4096].iter().all(|&b| b == 1), "reads still see the lost data");
    for model in CrashModel::ALL {
        let image = last_image(&fs, model, 3).read_file("/db/a").unwrap();
        assert!(image[..4096].iter().all(|&b| b == 0), "{model}: lost data came back");
        assert!(image[4096..].iter().all(|&b| b == 2), "{model}: synced data missing");
    }
}

#[test]
fn a_failed_persist_loses_the_pending_stores() {
    let (fs, storage) = fs_with_db();
    let pm = durable_file(&storage, "/db/pm", AccessMethod::Pmem, &[0u8; 128]);
    pm.store_u64(0, 9).unwrap();
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 1, FaultErrno::Eio)));
    assert_eq!(injected(pm.persist(0, 8)).0, Op::Persist);
    pm.persist(0, 8).unwrap();
    let image = last_image(&fs, CrashModel::KeepAll, 0).read_file("/db/pm").unwrap();
    assert_eq!(image[0], 0);
    assert_eq!(fs.read_file("/db/pm").unwrap()[0], 9);
}

// ---------------------------------------------------------------------------------------------
// 4. Fault injection
// ---------------------------------------------------------------------------------------------

#[test]
fn a_writeback_hint_is_not_an_io_point() {
    let (fs, storage) = fs_with_db();
    let old = pattern(8192, 1);
    let file = durable_file(&storage, "/db/hinted", AccessMethod::Syscall, &old);
    file.write_at(&pattern(8192, 2), 0).unwrap();
    let before = fs.op_count();
    file.start_writeback(0, 8192).unwrap();
    assert_eq!(fs.op_count(), before, "a hint is no crash point and no call to fail");
    assert!(file.start_writeback(0, 0).is_err(), "an empty range is still refused");
    // It made nothing durable: dropping every unsynced write leaves the old bytes.
    let image = last_image(&fs, CrashModel::DropAll, 1);
    assert_eq!(image.read_file("/db/hinted").unwrap(), old);
}

#[test]
fn a_vectored_write_is_one_io_point() {
    let (fs, storage) = fs_with_db();
    let file = durable_file(&storage, "/db/v", AccessMethod::Syscall, &[0u8; 64]);
    let before = fs.op_count();
    file.write_vectored_at(&[b"ab", b"", b"cde"], 10).unwrap();
    assert_eq!(fs.op_count(), before + 1);
    let mut back = [0u8; 5];
    file.read_at(&mut back, 10).unwrap();
    assert_eq!(&back, b"abcde");
}

#[test]
fn a_once_fault_fails_exactly_one_call_with_no_effect() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    let start = fs.calls();
    fs.set_fault(Some(FaultPlan::once(start + 3, FaultErrno::Eio)));
    file.write_at(b"one", 0).unwrap();
    file.write_at(b"two", 3).unwrap();
    let ops_before = fs.op_count();
    let (op, errno, call) = injected(file.write_at(b"three", 6));
    assert_eq!((op, errno, call), (Op::Write, FaultErrno::Eio, start + 3));
    assert_eq!(fs.op_count(), ops_before, "a failed write records nothing");
    assert_eq!(&fs.read_file("/db/a").unwrap()[..9], b"onetwo\0\0\0");
    file.write_at(b"four", 6).unwrap();
    assert!(storage.exists("/db/a").unwrap());
    assert_eq!(fs.calls(), start + 5);
}

#[test]
fn a_persistent_fault_fails_every_later_call() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    let start = fs.calls();
    fs.set_fault(Some(FaultPlan::from_call(start + 2, FaultErrno::Enospc)));
    file.write_at(b"ok", 0).unwrap();
    let mut buf = [0u8; 2];
    let results = [
        injected(file.write_at(b"no", 2)),
        injected(file.read_at(&mut buf, 0)),
        injected(file.sync_data()),
        injected(storage.list_dir("/db")),
        injected(storage.open("/db/b", &create(AccessMethod::Syscall))),
    ];
    for (index, (_, errno, call)) in results.into_iter().enumerate() {
        assert_eq!((errno, call), (FaultErrno::Enospc, start + 2 + index as u64));
    }
    fs.set_fault(None);
    file.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"ok");
}

#[test]
fn a_fault_restricted_to_one_op_skips_other_calls() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    let start = fs.calls();
    // `once` + `only`: the first sync at or after the call number fails, and only that one.
    fs.set_fault(Some(FaultPlan::once(start + 1, FaultErrno::Eio).only(Op::Sync)));
    file.write_at(b"ab", 0).unwrap();
    let (op, _, call) = injected(file.sync_data());
    assert_eq!((op, call), (Op::Sync, start + 2));
    file.sync_data().unwrap();
    file.write_at(b"cd", 2).unwrap();
    // `from_call` + `only`: every growth fails from then on; writes inside the file work.
    fs.set_fault(Some(FaultPlan::from_call(fs.calls() + 1, FaultErrno::Enospc).only(Op::Allocate)));
    file.write_at(b"ef", 0).unwrap();
    for _ in 0..3 {
        let (op, errno, _) = injected(file.reserve(file.len() + 1));
        assert_eq!((op, errno), (Op::Allocate, FaultErrno::Enospc));
    }
    file.sync_data().unwrap();
    assert_eq!(&fs.read_file("/db/a").unwrap()[..4], b"efcd");
}

#[test]
fn enospc_and_eio_are_reported_as_such() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 1, FaultErrno::Enospc)));
    let error = file.write_at(b"x", 0).unwrap_err();
    assert!(error.is_no_space());
    assert_eq!(error.op(), Some(Op::Write));
    let message = error.to_string();
    assert!(message.contains("ENOSPC") && message.contains("/db/a"), "{message}");
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 1, FaultErrno::Eio)));
    let error = file.write_at(b"x", 0).unwrap_err();
    assert!(!error.is_no_space());
    assert!(error.to_string().contains("EIO"), "{error}");
}

/// A small workload that touches every counted call. Propagates every error.
fn fault_workload(storage: &Storage) -> Result<(), Error> {
    storage.create_dir_all("/db/wal")?;
    storage.sync_dir("/")?;
    storage.sync_dir("/db")?;
    let log = storage.open("/db/wal/1.log", &create(AccessMethod::Syscall))?;
    log.write_at(b"hello", 0)?;
    log.sync_data()?;
    storage.sync_dir("/db/wal")?;
    log.reserve(10_000)?;
    log.persist(0, 5)?;
    log.set_len(4096)?;
    let mut buf = [0u8; 5];
    log.read_at(&mut buf, 0)?;
    assert_eq!(&buf, b"hello", "a completed write must be readable");
    log.store_u64(8, 7)?;
    log.advise_dontneed()?;
    log.sync_all()?;
    let pm = storage.open("/db/pm", &create(AccessMethod::Pmem))?;
    pm.write_at(&[1; 100], 0)?;
    pm.store_u64(128, 1)?;
    pm.persist(0, 136)?;
    storage.rename("/db/wal/1.log", "/db/wal/2.log")?;
    storage.list_dir("/db/wal")?;
    storage.exists("/db/wal/2.log")?;
    storage.remove_file("/db/pm")?;
    storage.sync_dir("/db/wal")?;
    Ok(())
}

#[test]
fn fault_sweep_fails_each_call_in_turn_with_typed_errors() {
    let clean = SimFs::new();
    fault_workload(&Storage::Sim(clean.clone())).unwrap();
    let total_calls = clean.calls();
    assert!(total_calls >= 20, "the workload makes {total_calls} calls");
    for persistent in [false, true] {
        for errno in [FaultErrno::Eio, FaultErrno::Enospc] {
            let mut completed_at = None;
            // Bounded: the workload makes total_calls calls, so call total_calls + 1 is never hit.
            for call in 1..=total_calls + 1 {
                let fs = SimFs::new();
                fs.set_fault(Some(FaultPlan::at(call, errno, persistent)));
                match fault_workload(&Storage::Sim(fs.clone())) {
                    Ok(()) => {
                        completed_at = Some(call);
                        break;
                    }
                    Err(error) => {
                        let (_, found, at) = injected(Err::<(), _>(error));
                        assert_eq!((found, at), (errno, call), "the fault fired at the wrong call");
                    }
                }
                // Every crash image of a faulted run can be built.
                for model in CrashModel::ALL {
                    let _ = last_image(&fs, model, call).snapshot();
                }
            }
            assert_eq!(
                completed_at,
                Some(total_calls + 1),
                "the workload completes once no call fails"
            );
        }
    }
}
