//! Builds the C peers' shim (`csrc/peers.c`) when the `c-peers` feature is on, and links it
//! against the system's RocksDB, LMDB and WiredTiger. Without the feature it does nothing.

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
        for library in ["rocksdb", "lmdb", "wiredtiger"] {
            println!("cargo:rustc-link-lib=dylib={library}");
        }
    }
}
