#pragma once
// Chakra execution traces (MLCommons, schema et_def.proto 0.0.4): one file per device,
// `<dir>/tessel.<device>.et`, holding a GlobalMetadata message and then one Node per
// task, each message prefixed by its length as a varint (Chakra's protolib framing).
//
// Mapping of a task graph:
//   compute, touch  COMP_NODE on its device; duration_micros from the compute model
//                   (sim/compute_model.h) on the given machine, rounded to the nearest
//                   microsecond; attributes num_ops (int64 flops), tensor_size (int64
//                   bytes), is_cpu_op (bool false)
//   move            COMM_SEND_NODE on the source device and COMM_RECV_NODE on the
//                   destination, both with attributes comm_src, comm_dst, comm_tag (the
//                   move's task id) and comm_size (int64 bytes: ASTRA-sim's feeder reads
//                   it as int64 and any other type as 0)
//   collective      (a lowered collective node, LowerOptions::collectives) COMM_COLL_NODE
//                   on each rank's device, with attributes comm_type (int64 Chakra
//                   CollectiveCommType: ALL_REDUCE 0, ALL_GATHER 2, ALL_TO_ALL 6,
//                   REDUCE_SCATTER 7) and comm_size (int64 bytes per rank, S as
//                   nccl-tests counts it); its data_deps are the writers of that rank's
//                   input, and a task reading its output on that rank depends on it
//   input, output   no node: inputs are resident at the start, outputs stay where they
//                   are; dependencies on an input are dropped
// Node ids are task ids; a node's data_deps are the ids of the tasks it depends on in
// its own file (a dependency on a move arriving here is its receive node).

#include <string>
#include <vector>

#include "core/machine.h"
#include "core/output_files.h"
#include "core/task_graph.h"

namespace tessel::experiments {

// Whether this build can write Chakra traces (protobuf was found at configure time).
[[nodiscard]] bool chakra_available();

// Writes the trace of `tg` into `dir` (created if needed); returns the files written.
// An Error, with no file left behind, when this build has no protobuf or a task cannot
// be expressed (a dependency across devices that is not a move: named by task id and
// graph node).
std::vector<std::string> write_chakra(const TaskGraph& tg, const Graph& g, const Machine& machine,
                                      const std::string& dir);
// The same files staged in `out` (whose add_folder(dir) the caller made), in place only
// when the caller commits the batch with its other outputs.
std::vector<std::string> stage_chakra(const TaskGraph& tg, const Graph& g, const Machine& machine,
                                      const std::string& dir, OutputBatch& out);

// For tests: a trace file read back with the protobuf library.
struct ChakraAttr {
  std::string name;
  enum class Kind { int64, uint64, boolean, string, other } kind = Kind::other;
  std::int64_t int_value = 0;
  std::string string_value;
};
struct ChakraNode {
  std::uint64_t id = 0;
  std::string name;
  int type = 0;  // NodeType: 4 COMP, 5 SEND, 6 RECV, 7 COLL
  std::vector<std::uint64_t> data_deps;
  std::uint64_t duration_micros = 0;
  std::vector<ChakraAttr> attrs;
  [[nodiscard]] const ChakraAttr* attr(const std::string& name) const;
};
struct ChakraTrace {
  std::string version;
  std::vector<ChakraNode> nodes;
};
[[nodiscard]] ChakraTrace read_chakra(const std::string& path);

}  // namespace tessel::experiments
