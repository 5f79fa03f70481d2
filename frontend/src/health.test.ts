import { describe, expect, it } from "vitest";
import { countsText, foldTrace, workerLabel } from "./health";

const TRACE = `Traceback (most recent call last):
  File "/app/webapp/runtime/worker.py", line 440, in _step
    result = self._task.run_batch()
  File "/venv/lib/python3.12/site-packages/pyspark/sql/dataframe.py", line 10, in collect
    sock_info = self._jdf.collectToPython()
  File "/venv/lib/python3.12/site-packages/py4j/java_gateway.py", line 1322, in __call__
    return_value = get_return_value(
  File "/venv/lib/python3.12/site-packages/pyspark/errors/exceptions/captured.py", line 185, in deco
    raise converted from None
webapp.plugin.errors.ConnectException: Cannot read /data/bad.csv`;

describe("traces", () => {
  it("fold runs of library frames and keep the project's frames and the exception visible", () => {
    const parts = foldTrace(TRACE);
    const folded = parts.filter((p) => p.folded);
    expect(folded).toHaveLength(1);
    expect(folded[0].lines).toHaveLength(6); // three library frames, each with its source line
    expect(folded[0].lines.every((l) => !l.includes("webapp/"))).toBe(true);
    const shown = parts.filter((p) => !p.folded).flatMap((p) => p.lines).join("\n");
    expect(shown).toContain('File "/app/webapp/runtime/worker.py"');
    expect(shown).toContain("ConnectException: Cannot read /data/bad.csv");
    // nothing lost: unfolding everything gives the trace back
    expect(parts.flatMap((p) => p.lines).join("\n")).toBe(TRACE);
  });

  it("do not fold a lone library frame, nor a trace without frames", () => {
    const one = `Traceback (most recent call last):\n  File "/venv/lib/python3.12/site-packages/x.py", line 1, in f\n    g()\nValueError: x`;
    expect(foldTrace(one).some((p) => p.folded)).toBe(false);
    expect(foldTrace("just a message")).toEqual([{ folded: false, lines: ["just a message"] }]);
  });

  it("fold a compiled extension's frames (relative paths) too", () => {
    const pyx = [
      "Traceback (most recent call last):",
      '  File "/app/webapp/connectors/file.py", line 764, in _infer',
      "    table = pacsv.read_csv(",
      '  File "pyarrow/_csv.pyx", line 1377, in pyarrow._csv.read_csv',
      '  File "pyarrow/_csv.pyx", line 1386, in pyarrow._csv.read_csv',
      '  File "pyarrow/error.pxi", line 155, in pyarrow.lib.pyarrow_internal_check_status',
      "pyarrow.lib.ArrowInvalid: CSV parse error",
    ].join("\n");
    const parts = foldTrace(pyx);
    expect(parts.map((p) => [p.folded, p.lines.length])).toEqual([[false, 3], [true, 3], [false, 1]]);
  });

  it("fold JVM frames too", () => {
    const jvm = ["org.apache.spark.SparkException: boom", ...Array.from({ length: 5 }, (_, i) => `\tat org.apache.spark.rdd.RDD.f${i}(RDD.scala:${i})`)].join("\n");
    const parts = foldTrace(jvm);
    expect(parts.map((p) => [p.folded, p.lines.length])).toEqual([[false, 1], [true, 5]]);
  });
});

describe("names and counts", () => {
  it("name a worker by node id, falling back to its REST address", () => {
    expect(workerLabel({ node_id: "n2", rest_address: "10.0.0.2:8083" })).toBe("n2");
    expect(workerLabel({ node_id: null, rest_address: "10.0.0.2:8083" })).toBe("10.0.0.2:8083");
    expect(workerLabel(null)).toBe("–");
  });

  it("say task counts in words, zeros left out", () => {
    expect(countsText({ RUNNING: 2, FAILED: 1, PAUSED: 0 })).toBe("2 running, 1 failed");
    expect(countsText({ RUNNING: 0 })).toBe("no tasks");
  });
});
