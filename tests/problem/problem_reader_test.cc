#include "bmpipe/problem/problem_reader.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

// The tiny problem every test starts from; each test changes one field.
Json Base() {
  return Json::parse(R"({
    "pipeline": {"ranks": 2, "chunks": 1, "micro_batches": 4, "schedule": "1f1b"},
    "device": {"memory_bytes": 8e10, "reserved_bytes": 1e9},
    "p2p_s": 0.0002,
    "layers": [
      {"name": "embedding", "static_bytes": 2e9,
       "options": [{"name": "none", "forward_s": 0.001, "backward_s": 0.002, "recompute_s": 0,
                    "saved_bytes": 1e8, "peak_extra_bytes": 0}]},
      {"name": "decoder", "repeat": 3, "static_bytes": 1e9,
       "options": [{"name": "none", "forward_s": 0.004, "backward_s": 0.008, "saved_bytes": 5e8},
                   {"name": "full", "forward_s": 0.004, "backward_s": 0.008, "recompute_s": 0.004,
                    "saved_bytes": 2e7, "peak_extra_bytes": 3e8}]}
    ]})");
}

std::string ErrorOf(const Json& doc) {
  Result<Problem> r = ReadProblem(doc, "p.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

TEST(ProblemReader, ReadsTheBaseProblem) {
  Result<Problem> r = ReadProblem(Base(), "p.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Problem& p = r.value();
  EXPECT_EQ(p.pipeline.ranks, 2);
  EXPECT_EQ(p.pipeline.chunks, 1);
  EXPECT_EQ(p.pipeline.micro_batches, 4);
  EXPECT_EQ(p.pipeline.schedule, ScheduleKind::kOneFOneB);
  EXPECT_EQ(p.memory_bytes, 80'000'000'000);
  EXPECT_EQ(p.reserved_bytes, 1'000'000'000);
  EXPECT_EQ(p.p2p_ns, 200'000);
  ASSERT_EQ(p.num_layers(), 4);  // repeat expands the decoder entry
  EXPECT_EQ(p.layers[0].name, "embedding");
  EXPECT_EQ(p.layers[0].entry, 0);
  for (int l = 1; l < 4; ++l) {
    EXPECT_EQ(p.layers[l].name, "decoder");
    EXPECT_EQ(p.layers[l].entry, 1);
    EXPECT_EQ(p.layers[l].p2p_ns, 200'000);
    ASSERT_EQ(p.layers[l].options.size(), 2u);
  }
  const LayerOption& full = p.layers[3].options[1];
  EXPECT_EQ(full.name, "full");
  EXPECT_EQ(full.forward_ns, 4'000'000);
  EXPECT_EQ(full.backward_ns, 8'000'000);
  EXPECT_EQ(full.recompute_ns, 4'000'000);
  EXPECT_EQ(full.saved_bytes, 20'000'000);
  EXPECT_EQ(full.peak_extra_bytes, 300'000'000);
  EXPECT_EQ(p.layers[1].options[0].recompute_ns, 0);  // optional, defaults to 0
}

TEST(ProblemReader, YamlAndJsonGiveTheSameProblem) {
  const std::string yaml = R"(
pipeline: {ranks: 2, chunks: 1, micro_batches: 4, schedule: 1f1b}
device: {memory_bytes: 8e10, reserved_bytes: 1e9}
p2p_s: 0.0002
layers:
  - name: embedding
    static_bytes: 2e9
    options:
      - {name: none, forward_s: 0.001, backward_s: 0.002, recompute_s: 0, saved_bytes: 1e8, peak_extra_bytes: 0}
  - name: decoder
    repeat: 3
    static_bytes: 1.0e+9
    options:
      - {name: none, forward_s: 0.004, backward_s: 0.008, saved_bytes: 5e8}
      - {name: full, forward_s: 0.004, backward_s: 0.008, recompute_s: 0.004, saved_bytes: 2e7, peak_extra_bytes: 3e8}
)";
  Result<Json> doc = ParseDocument(yaml, "p.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  EXPECT_EQ(doc.value(), Base());
}

TEST(ProblemReader, DefaultsForOptionalKeys) {
  Json doc = Base();
  doc["pipeline"].erase("chunks");
  doc["device"].erase("reserved_bytes");
  Result<Problem> r = ReadProblem(doc, "p.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().pipeline.chunks, 1);
  EXPECT_EQ(r.value().reserved_bytes, 0);
}

TEST(ProblemReader, LayerP2POverridesTheDefault) {
  Json doc = Base();
  doc["layers"][0]["p2p_s"] = 0.001;
  Problem p = ReadProblem(doc, "p.json").value();
  EXPECT_EQ(p.layers[0].p2p_ns, 1'000'000);
  EXPECT_EQ(p.layers[1].p2p_ns, 200'000);
}

TEST(ProblemReader, OneFOneBWithChunksIsInterleaved) {
  Json doc = Base();
  doc["pipeline"]["chunks"] = 2;
  Problem p = ReadProblem(doc, "p.json").value();
  EXPECT_EQ(p.pipeline.schedule, ScheduleKind::kInterleavedOneFOneB);
  EXPECT_EQ(p.pipeline.stages(), 4);
}

TEST(ProblemReader, UnknownKeyIsAnErrorWithASuggestion) {
  Json doc = Base();
  doc["pipeline"]["micro_batch"] = 4;
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline: unknown key 'micro_batch'; did you mean 'micro_batches'?; the keys allowed here are: "
            "ranks, chunks, stages, virtual_stages, micro_batches, micro_batch_group, schedule, overlap");
  Json top = Base();
  top["comment"] = "x";
  EXPECT_NE(ErrorOf(top).find("p.json: top level: unknown key 'comment'"), std::string::npos);
  Json option = Base();
  option["layers"][1]["options"][1]["recompute"] = 1;
  EXPECT_NE(ErrorOf(option).find("p.json: layers[1].options[1]: unknown key 'recompute'; did you mean 'recompute_s'?"),
            std::string::npos);
}

TEST(ProblemReader, MissingFieldNamesThePathAndTheMeaning) {
  Json doc = Base();
  doc["layers"][1]["options"][0].erase("saved_bytes");
  EXPECT_EQ(ErrorOf(doc),
            "p.json: layers[1].options[0]: missing required key 'saved_bytes' (activation bytes kept from forward to "
            "backward per micro-batch)");
  Json no_layers = Base();
  no_layers.erase("layers");
  EXPECT_EQ(ErrorOf(no_layers), "p.json: top level: missing required key 'layers' (the model's layers in order)");
}

TEST(ProblemReader, NegativeAndNonFiniteNumbers) {
  Json doc = Base();
  doc["layers"][0]["options"][0]["forward_s"] = -0.5;
  EXPECT_EQ(ErrorOf(doc), "p.json: layers[0].options[0].forward_s = -0.5: a time cannot be negative; give seconds >= 0");
  Json bytes = Base();
  bytes["layers"][1]["static_bytes"] = -1;
  EXPECT_EQ(ErrorOf(bytes),
            "p.json: layers[1].static_bytes = -1: a memory size cannot be negative; give bytes >= 0");
  // JSON cannot spell infinity; YAML can.
  Result<Json> yaml = ParseDocument("pipeline: {stages: 1, micro_batches: 1, schedule: 1f1b}\n"
                                    "device: {memory_bytes: .inf}\np2p_s: 0\nlayers: []\n",
                                    "p.yaml");
  ASSERT_TRUE(yaml.ok());
  EXPECT_EQ(ReadProblem(yaml.value(), "p.yaml").error().message,
            "p.yaml: device.memory_bytes = inf: must be a finite number");
  Json text = Base();
  text["p2p_s"] = "fast";
  EXPECT_EQ(ErrorOf(text), "p.json: p2p_s = \"fast\": expected a number, found a string");
  Json huge = Base();
  huge["layers"][0]["options"][0]["backward_s"] = 5e6;
  EXPECT_EQ(ErrorOf(huge), "p.json: layers[0].options[0].backward_s = 5000000.0: more than 1e+06 s; is the unit seconds?");
}

// Older files name the ranks `stages` and the chunks `virtual_stages`: read the same, with a note.
TEST(ProblemReader, OldPipelineNamesAreReadWithANote) {
  Json doc = Base();
  doc["pipeline"].erase("ranks");
  doc["pipeline"].erase("chunks");
  doc["pipeline"]["stages"] = 2;
  doc["pipeline"]["virtual_stages"] = 2;
  std::vector<std::string> notes;
  Result<Problem> r = ReadProblem(doc, "p.json", &notes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().pipeline.ranks, 2);
  EXPECT_EQ(r.value().pipeline.chunks, 2);
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "p.json: pipeline.stages is the old name of pipeline.ranks (the pipeline ranks; a stage is one "
                       "model chunk of one rank); it is read as that, rename it",
                       "p.json: pipeline.virtual_stages is the old name of pipeline.chunks (model chunks per rank); it "
                       "is read as that, rename it"}));
  // Both names of one key: read when they agree, without a note.
  doc["pipeline"]["ranks"] = 2;
  notes.clear();
  ASSERT_TRUE(ReadProblem(doc, "p.json", &notes).ok());
  EXPECT_EQ(notes.size(), 1u);  // virtual_stages alone still
  doc["pipeline"]["ranks"] = 4;
  EXPECT_EQ(ErrorOf(doc), "p.json: pipeline.stages = 2: is the old name of pipeline.ranks, which says 4; give one of them");
  // A refused problem keeps its notes: its messages name the keys by their new names.
  doc["pipeline"].erase("ranks");
  doc["pipeline"]["stages"] = 9;
  notes.clear();
  const Result<Problem> refused = ReadProblem(doc, "p.json", &notes);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "p.json: pipeline.micro_batches = 4: schedule 'interleaved-1f1b' needs at least pipeline.ranks = 9 micro-batches "
            "(Megatron's order); raise micro_batches or set chunks to 1");
  EXPECT_EQ(notes.size(), 2u);
  doc["pipeline"]["stages"] = 2;
  doc["pipeline"].erase("ranks");
  doc["pipeline"].erase("stages");
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline: missing required key 'ranks' (the pipeline-parallel size; older files call it stages)");
}

TEST(ProblemReader, ZeroMicroBatches) {
  Json doc = Base();
  doc["pipeline"]["micro_batches"] = 0;
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline.micro_batches = 0: must be between 1 and 65536; a pipeline needs at least 1 "
            "micro-batch; set it to global batch / (data-parallel size x micro-batch size)");
}

TEST(ProblemReader, FractionalStages) {
  Json doc = Base();
  doc["pipeline"]["ranks"] = 2.5;
  EXPECT_EQ(ErrorOf(doc), "p.json: pipeline.ranks = 2.5: must be a whole number; give the pipeline-parallel size");
}

TEST(ProblemReader, MoreStagesThanLayers) {
  Json doc = Base();
  doc["pipeline"]["ranks"] = 5;
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline: ranks x chunks = 5 x 1 = 5 pipeline stages, but the model has only 4 layers; "
            "every stage needs at least one layer, so lower pipeline.ranks or chunks");
  Json chunks = Base();
  chunks["pipeline"]["chunks"] = 3;
  chunks["pipeline"]["micro_batches"] = 4;
  EXPECT_NE(ErrorOf(chunks).find("2 x 3 = 6 pipeline stages, but the model has only 4 layers"), std::string::npos);
}

TEST(ProblemReader, InterleavingRunsMegatronsMicroBatchGroups) {
  Json doc = Base();
  doc["pipeline"]["chunks"] = 2;
  doc["pipeline"]["micro_batches"] = 5;
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline.micro_batches = 5: schedule 'interleaved-1f1b' in Megatron's default groups of pipeline.ranks = 2 "
            "micro-batches needs a multiple of 2; use 4 or 6, or set pipeline.micro_batch_group to 3 or 5 (Megatron's "
            "--microbatch-group-size-per-virtual-pipeline-stage), or set chunks to 1");
  // Groups of 3: 5 = 3 + 2, the last group at least the ranks.
  doc["pipeline"]["micro_batch_group"] = 3;
  const Problem p = ReadProblem(doc, "p.json").value();
  EXPECT_EQ(p.pipeline.MicroBatchGroup(), 3);
  doc["pipeline"]["micro_batch_group"] = 4;  // 5 = 4 + 1: the last group is shorter than the ranks
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline.micro_batch_group = 4: schedule 'interleaved-1f1b' runs each chunk on groups of N micro-batches "
            "with pipeline.ranks <= N <= micro_batches and micro_batches mod N either 0 or at least the ranks; with 5 "
            "micro-batches on 2 ranks set pipeline.micro_batch_group to 3 or 5 (Megatron's "
            "--microbatch-group-size-per-virtual-pipeline-stage), or set chunks to 1");
  doc["pipeline"]["chunks"] = 1;
  doc["pipeline"]["micro_batch_group"] = 3;
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline.micro_batch_group = 3: schedule '1f1b' runs no micro-batch groups (only "
            "'interleaved-1f1b' and 'interleaved-zb' do); remove it");
}

TEST(ProblemReader, ScheduleNames) {
  Json doc = Base();
  doc["pipeline"]["schedule"] = "zb-h3";
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline.schedule = \"zb-h3\": unknown schedule; use one of 'gpipe', '1f1b', 'interleaved-1f1b', "
            "'zb-h1', 'zb-h2', 'zb-v', 'interleaved-zb', "
            "'dualpipe', 'dualpipev'");
  doc["pipeline"]["schedule"] = "zb-h1";
  EXPECT_EQ(ErrorOf(doc),
            "p.json: pipeline.schedule = 'zb-h1' splits each backward into its input-gradient and weight-gradient "
            "parts, but no layer gives weight_grad_s; give each layer's weight-gradient time (bmpipe build computes "
            "it), or use schedule '1f1b'");
  Json gpipe = Base();
  gpipe["pipeline"]["schedule"] = "gpipe";
  gpipe["pipeline"]["chunks"] = 2;
  EXPECT_NE(ErrorOf(gpipe).find("schedule 'gpipe' runs one chunk per rank"), std::string::npos);
  Json interleaved = Base();
  interleaved["pipeline"]["schedule"] = "interleaved-1f1b";
  EXPECT_NE(ErrorOf(interleaved).find("schedule 'interleaved-1f1b' runs at least 2 chunks per rank"), std::string::npos);
  // DualPipe: two chunks, an even number of ranks, an even number of at least 2p micro-batches.
  Json dualpipe = Base();
  dualpipe["pipeline"] = Json::parse(R"({"ranks": 2, "chunks": 2, "micro_batches": 4, "schedule": "dualpipe"})");
  dualpipe["layers"][1]["weight_grad_s"] = 0.003;
  EXPECT_TRUE(ReadProblem(dualpipe, "p.json").ok());
  dualpipe["pipeline"]["micro_batches"] = 5;
  EXPECT_NE(ErrorOf(dualpipe).find("pipeline.micro_batches = 5: schedule 'dualpipe' feeds half the micro-batches from "
                                   "each end and needs an even number, such as 6"),
            std::string::npos)
      << ErrorOf(dualpipe);
  dualpipe["pipeline"]["micro_batches"] = 2;
  EXPECT_NE(ErrorOf(dualpipe).find("needs at least 2 x pipeline.ranks = 4 micro-batches"), std::string::npos)
      << ErrorOf(dualpipe);
  dualpipe["pipeline"]["ranks"] = 3;
  dualpipe["pipeline"]["micro_batches"] = 6;
  EXPECT_NE(ErrorOf(dualpipe).find("pipeline.ranks = 3: schedule 'dualpipe' pairs rank r with rank ranks-1-r"),
            std::string::npos)
      << ErrorOf(dualpipe);
}

TEST(ProblemReader, DuplicateOptionNames) {
  Json doc = Base();
  doc["layers"][1]["options"][1]["name"] = "none";
  EXPECT_EQ(ErrorOf(doc),
            "p.json: layers[1].options[1].name = \"none\": duplicate option name (also layers[1].options[0]); option "
            "names must be unique within a layer");
}

TEST(ProblemReader, EmptyListsAndWrongTypes) {
  Json doc = Base();
  doc["layers"] = Json::array();
  EXPECT_EQ(ErrorOf(doc), "p.json: layers = []: the list is empty; give at least one entry");
  Json options = Base();
  options["layers"][0]["options"] = Json::object();
  EXPECT_EQ(ErrorOf(options), "p.json: layers[0].options = {}: expected a list, found an object");
  EXPECT_EQ(ErrorOf(Json::array()), "p.json: top level = []: expected an object (key: value pairs), found a list");
}

TEST(ProblemReader, RepeatMustBePositive) {
  Json doc = Base();
  doc["layers"][1]["repeat"] = 0;
  EXPECT_NE(ErrorOf(doc).find("p.json: layers[1].repeat = 0: must be between 1 and 100000"), std::string::npos);
}

TEST(ProblemReader, ReservedMustLeaveMemory) {
  Json doc = Base();
  doc["device"]["reserved_bytes"] = 9e10;
  EXPECT_EQ(ErrorOf(doc),
            "p.json: device: reserved_bytes = 90000000000 leaves no memory of memory_bytes = 80000000000; lower "
            "reserved_bytes");
}

TEST(ProblemReader, LoadsTheExamplesAndReportsMissingFiles) {
  Result<Problem> demo = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem.yaml"));
  ASSERT_TRUE(demo.ok()) << demo.error().message;
  EXPECT_EQ(demo.value().num_layers(), 98);
  Result<Problem> missing = LoadProblem("/nonexistent/problem.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kIo);
  EXPECT_EQ(missing.error().message, "/nonexistent/problem.json: cannot open file for reading (No such file or directory)");
}

}  // namespace
}  // namespace bmpipe
