//! Builds the C peers' shim (`csrc/peers.c`) when the `c-peers` feature is on, and links it
//! against the system's LMDB and WiredTiger. The system's RocksDB is not linked: the shim
//! loads it at run time (dlopen), so that it cannot clash with the RocksDB the `rocksdb`
//! crate links in with the `rocksdb-crate` feature. Without `c-peers` it does nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "c-peers")]
    {
        println!("cargo:rerun-if-changed=csrc/peers.c");
        cc::Build::new()
            .file("csrc/peers.c")
            .warnings(true)
            .extra_warnings(true)
            .compile("tierkv_peers");
        for library in ["lmdb", "wiredtiger", "dl"] {
            println!("cargo:rustc-link-lib=dylib={library}");
        }
    }
}
