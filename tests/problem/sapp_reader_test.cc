// The MindFormers pipeline-balance tool's inputs: the decomposition of its demo's dry-run memory
// (the terms that tool publishes), its layer JSON, and the under-determined case.
#include "bmpipe/problem/sapp_reader.h"

#include <fstream>

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

TEST(Sapp, DecomposesTheDemoMemoryAsTheToolDoes) {
  const Json doc = LoadDocument(testing::SourcePath("examples/mindformers-demo/init_demo.yaml")).value();
  const SappMemory m = DecomposeSappMemory(doc, "init_demo.yaml").value();
  EXPECT_NEAR(m.constant, 1206.8, 0.05);
  EXPECT_NEAR(m.parameter, 2217.5, 0.05);
  ASSERT_EQ(m.types, (std::vector<std::string>{"none", "select", "select_comm", "both"}));
  EXPECT_NEAR(m.activation[0], 1002.9, 0.05);
  EXPECT_NEAR(m.activation[1], 783.5, 0.05);
  EXPECT_NEAR(m.activation[2], 695.8, 0.05);
  EXPECT_NEAR(m.activation[3], 423.1, 0.05);
  EXPECT_NEAR(m.head, 4614.7, 0.05);
  EXPECT_NEAR(m.tail, 5885.7, 0.05);
}

TEST(Sapp, BuildsTheProblemTheToolPlans) {
  const Problem p = LoadSappProblem(testing::SourcePath("examples/mindformers-demo/init_demo.yaml"), {16, 16, 1, 56000}).value();
  ASSERT_EQ(p.num_layers(), 98);
  EXPECT_EQ(p.pipeline.ranks, 16);
  EXPECT_EQ(p.pipeline.micro_batches, 16);
  EXPECT_EQ(p.memory_bytes, 56'000'000'000);
  EXPECT_NEAR(static_cast<double>(p.reserved_bytes), 1206.8e6, 0.05e6);
  // The stage constant is inside the measured head and tail peaks: counted once.
  EXPECT_NEAR(static_cast<double>(p.layers.front().static_bytes), (4614.7 - 1206.8) * 1e6, 0.1e6);
  const Layer& body = p.layers[1];
  ASSERT_EQ(body.options.size(), 4u);
  EXPECT_EQ(body.options[3].name, "both");
  EXPECT_EQ(body.options[3].forward_ns, 90'000'000);
  EXPECT_EQ(body.options[3].backward_ns + body.options[3].recompute_ns, 209'700'000);  // (1 + 0.165) x 180 ms
}

TEST(Sapp, ReadsTheToolsLayerJson) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/demo.json";
  std::ofstream(path) << R"({"name": "demo", "stage_const_mem": 1206, "layers_description": [
    {"name": "LlamaEmbedding", "type": "HEAD", "model_name": "demo", "time": 90, "nb_layer": 1, "memory_parameter": 4614},
    {"name": "LLamaDecodeLayer", "type": "BODY", "model_name": "demo", "time": 90, "nb_layer": 96,
     "memory_parameter": 2217, "memory_activation": 1002, "memory_select_rec": 783, "memory_select_comm": 695,
     "memory_both_comm_select": 423, "memory_recompute": 0},
    {"name": "lm_head-Linear", "type": "TAIL", "model_name": "demo", "time": 180, "nb_layer": 1, "memory_parameter": 5885}]})";
  const Problem p = LoadSappProblem(path, {8, 32, 1, 60000}).value();
  EXPECT_EQ(p.num_layers(), 98);
  EXPECT_EQ(p.layers[1].options.size(), 4u);  // memory_recompute 0: full is not considered, as in the tool
  EXPECT_EQ(p.layers[1].options[1].saved_bytes, 783'000'000);
  EXPECT_EQ(p.layers.back().options[0].backward_ns, 360'000'000);
  std::remove(path.c_str());
}

TEST(Sapp, SaysWhenTheMeasurementsAreTooFew) {
  Json doc = LoadDocument(testing::SourcePath("examples/mindformers-demo/init_demo.yaml")).value();
  doc["memory_usage"]["body_memories"]["stage_id"] = Json::array({1, 2, 3});
  doc["memory_usage"]["body_memories"]["memories"] = Json::array({60854, 27620, 54533});
  const Result<SappMemory> m = DecomposeSappMemory(doc, "init_demo.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("under-determined"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("need at least 4 (and 5 to also find the per-stage constant)"), std::string::npos)
      << m.error().message;
}

// Found by fuzz_sapp: layers that do not divide among the dry run's stages and no offsets to say
// where the rest go are an error naming the pipeline config, not a read of an absent offset.
TEST(Sapp, LayersThatDoNotDivideWithoutOffsetsAreAnError) {
  Json doc = LoadDocument(testing::SourcePath("examples/mindformers-demo/init_demo.yaml")).value();
  doc["pipeline_config"].erase("offset");
  doc["pipeline_config"]["pipeline_num"] = 6;
  doc["pipeline_config"]["num_layer"] = 16;
  const Result<SappMemory> m = DecomposeSappMemory(doc, "init_demo.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("pipeline_config: round 0: the stages hold 12 layers, num_layer is 16"),
            std::string::npos)
      << m.error().message;
}

}  // namespace
}  // namespace bmpipe
