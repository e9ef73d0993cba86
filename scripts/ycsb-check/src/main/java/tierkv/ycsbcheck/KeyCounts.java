// YCSB's own key stream, counted: drives YCSB's CoreWorkload (site.ycsb:core, from Maven
// Central) as one client thread of `ycsb run` would, against a DB that only counts the keys
// it is asked for, and prints `key<TAB>count`, most requested first. scripts/ycsb-check.sh
// compares this with crates/bench/examples/ycsb_keys.rs, which prints the same for tierkv's
// generator.
//
// Usage: KeyCounts <workload a-f> <records> <operations> [top]
//
// The workload properties are those of YCSB's workloads/workloada ... workloadf; the rest
// (fieldcount 10, fieldlength 100, insertorder hashed, zeropadding 1) are CoreWorkload's
// defaults, which those files keep. Every DB call that names a key counts once: a read, an
// update, a scan's start key; a read-modify-write is a read and an update (two). Inserts are
// not counted: their keys come from the insert counter, not from the request distribution.

package tierkv.ycsbcheck;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.Status;
import site.ycsb.measurements.Measurements;
import site.ycsb.workloads.CoreWorkload;

public final class KeyCounts {
  private KeyCounts() {
  }

  /** A DB that stores nothing and counts the keys it is asked to read, update or scan from. */
  static final class RecordingDb extends DB {
    final Map<String, long[]> counts = new HashMap<>();

    private void count(String key) {
      counts.computeIfAbsent(key, k -> new long[1])[0]++;
    }

    @Override
    public Status read(String table, String key, Set<String> fields,
        Map<String, ByteIterator> result) {
      count(key);
      return Status.OK;
    }

    @Override
    public Status scan(String table, String startkey, int recordcount, Set<String> fields,
        Vector<HashMap<String, ByteIterator>> result) {
      count(startkey);
      return Status.OK;
    }

    @Override
    public Status update(String table, String key, Map<String, ByteIterator> values) {
      count(key);
      return Status.OK;
    }

    @Override
    public Status insert(String table, String key, Map<String, ByteIterator> values) {
      return Status.OK;
    }

    @Override
    public Status delete(String table, String key) {
      return Status.OK;
    }
  }

  /** The properties of YCSB's workloads/workload<letter>, or null for an unknown letter. */
  static Properties workload(String letter) {
    Properties p = new Properties();
    p.setProperty("workload", "site.ycsb.workloads.CoreWorkload");
    p.setProperty("readallfields", "true");
    p.setProperty("readproportion", "0");
    p.setProperty("updateproportion", "0");
    p.setProperty("scanproportion", "0");
    p.setProperty("insertproportion", "0");
    p.setProperty("readmodifywriteproportion", "0");
    p.setProperty("requestdistribution", "zipfian");
    switch (letter.toLowerCase()) {
      case "a":
        p.setProperty("readproportion", "0.5");
        p.setProperty("updateproportion", "0.5");
        break;
      case "b":
        p.setProperty("readproportion", "0.95");
        p.setProperty("updateproportion", "0.05");
        break;
      case "c":
        p.setProperty("readproportion", "1");
        break;
      case "d":
        p.setProperty("readproportion", "0.95");
        p.setProperty("insertproportion", "0.05");
        p.setProperty("requestdistribution", "latest");
        break;
      case "e":
        p.setProperty("scanproportion", "0.95");
        p.setProperty("insertproportion", "0.05");
        p.setProperty("maxscanlength", "100");
        p.setProperty("scanlengthdistribution", "uniform");
        break;
      case "f":
        p.setProperty("readproportion", "0.5");
        p.setProperty("readmodifywriteproportion", "0.5");
        break;
      default:
        return null;
    }
    return p;
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 3 || args.length > 4) {
      System.err.println("usage: KeyCounts <workload a-f> <records> <operations> [top]");
      System.exit(2);
    }
    Properties p = workload(args[0]);
    if (p == null) {
      System.err.println("unknown workload '" + args[0] + "': expected one of a-f");
      System.exit(2);
    }
    long operations = Long.parseLong(args[2]);
    int top = args.length == 4 ? Integer.parseInt(args[3]) : Integer.MAX_VALUE;
    p.setProperty("recordcount", args[1]);
    p.setProperty("operationcount", args[2]);

    // CoreWorkload reaches the measurements singleton, which needs its properties first.
    Measurements.setProperties(p);
    CoreWorkload workload = new CoreWorkload();
    workload.init(p);
    RecordingDb db = new RecordingDb();
    db.setProperties(p);
    db.init();
    Object state = workload.initThread(p, 0, 1);
    for (long i = 0; i < operations; i++) {
      if (!workload.doTransaction(db, state)) {
        throw new IllegalStateException("transaction " + i + " failed");
      }
    }
    workload.cleanup();

    List<Map.Entry<String, long[]>> entries = new ArrayList<>(db.counts.entrySet());
    entries.sort((x, y) -> {
      int byCount = Long.compare(y.getValue()[0], x.getValue()[0]);
      return byCount != 0 ? byCount : x.getKey().compareTo(y.getKey());
    });
    try (BufferedWriter out = new BufferedWriter(
        new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16)) {
      for (Map.Entry<String, long[]> entry : entries.subList(0, Math.min(top, entries.size()))) {
        out.write(entry.getKey());
        out.write('\t');
        out.write(Long.toString(entry.getValue()[0]));
        out.write('\n');
      }
    }
  }
}
