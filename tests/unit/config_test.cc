#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cohort/core/error.h"
#include "cohort/train/config/train_config.h"

namespace cohort::train {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "cohort_config_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument thrown";
}

TEST(Config, LoadsTypedValuesAndOverrides) {
  std::string p = write_temp("ok.toml",
                             "[optim]\nname = \"adamw\"\nlr = 1\n[model]\n"
                             "hidden = [32, 16]\n");
  Config c = load_config(p, {"optim.lr=0.25", "data.shuffle=false"});
  EXPECT_EQ(c.get_string("optim.name"), "adamw");
  EXPECT_DOUBLE_EQ(c.get_float("optim.lr"), 0.25);  // --set wins over the file; int -> float
  EXPECT_EQ(c.get_int_list("model.hidden"), (std::vector<int64_t>{32, 16}));
  EXPECT_FALSE(c.get_bool("data.shuffle"));
  EXPECT_EQ(c.get_string("run.name"), "ok");  // defaults to the file's stem
  EXPECT_EQ(c.get_int("data.batch_size"), 64);
}

TEST(Config, UnknownKeySuggestsTheClosest) {
  std::string p = write_temp("typo.toml", "[optim]\nlearning_rate = 0.1\nmomentun = 0.9\n");
  std::string msg = error_of([&] { load_config(p, {}); });
  EXPECT_NE(msg.find("typo.toml:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown config key 'optim.learning_rate'"), std::string::npos) << msg;
  msg = error_of([&] { load_config("", {"optim.momentun=0.5"}); });
  EXPECT_NE(msg.find("did you mean 'optim.momentum'"), std::string::npos) << msg;
}

// model.layers: a TOML list of tables (nested for a residual block) or of strings is the same
// layer list as its one-line text, and that text survives the run's config.toml.
TEST(Config, ALayerListCanBeTablesOrStringsAndReadsBack) {
  std::string tables = write_temp("layers.toml",
                                  "[model]\ntype = \"sequential\"\n"
                                  "[[model.layers]]\ntype = \"conv2d\"\nout = 8\nkernel = 3\n"
                                  "[[model.layers]]\ntype = \"residual\"\n"
                                  "layers = [{type = \"batchnorm\", momentum = 0.25}, "
                                  "{type = \"relu\"}]\n"
                                  "[[model.layers]]\ntype = \"dropout\"\np = 0.5\n");
  // A table's options come in key order (toml++ keeps tables sorted); options are named.
  const std::string want =
      "conv2d kernel=3 out=8; residual; batchnorm momentum=0.25; relu; end; "
      "dropout p=0.5";
  EXPECT_EQ(load_config(tables, {}).get_string("model.layers"), want);
  std::string strings =
      write_temp("strings.toml", "[model]\nlayers = [\"flatten\", \"linear 8\", \"linear\"]\n");
  EXPECT_EQ(load_config(strings, {}).get_string("model.layers"), "flatten; linear 8; linear");
  // A multi-line string reads back from the TOML the run directory records.
  std::string multi = write_temp("multi.toml",
                                 "[model]\nlayers = \"\"\"\nflatten\n"
                                 "linear \\\"8\\\"\n\"\"\"\n");
  Config c = load_config(multi, {});
  Config back = load_config(write_temp("back.toml", c.to_toml()), {});
  EXPECT_EQ(back.get_string("model.layers"), c.get_string("model.layers"));
  EXPECT_NE(c.get_string("model.layers").find('\n'), std::string::npos);
  std::string bad = write_temp("badlayers.toml", "[[model.layers]]\nout = 3\n");
  EXPECT_NE(error_of([&] { load_config(bad, {}); }).find("needs type = "), std::string::npos);
}

TEST(Config, InvalidTomlNamesFileAndLine) {
  std::string p = write_temp("bad.toml", "[optim]\nlr = = 3\n");
  std::string msg = error_of([&] { load_config(p, {}); });
  EXPECT_NE(msg.find("bad.toml:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid TOML"), std::string::npos) << msg;
}

TEST(Config, TypeRangeAndChoiceErrors) {
  EXPECT_NE(error_of([] { load_config("", {"data.batch_size=abc"}); }).find("expects a int"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_config("", {"optim.lr=-1"}); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_config("", {"model.type=resnet"}); }).find("is not one of"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_config("", {"noequals"}); }).find("expected key=value"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_config("/nonexistent/x.toml", {}); }).find("does not exist"),
            std::string::npos);
  std::string p = write_temp("type.toml", "[data]\nbatch_size = \"big\"\n");
  std::string msg = error_of([&] { load_config(p, {}); });
  EXPECT_NE(msg.find("type.toml:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'data.batch_size' expects a int, got a string"), std::string::npos) << msg;
}

TEST(Config, EnvironmentVariableIsBelowTheFile) {
  Config c = load_config("", {}, {{"COHORT_NUM_THREADS", "3"}});
  EXPECT_EQ(c.get_int("run.threads"), 3);
  c = load_config("", {"run.threads=1"}, {{"COHORT_NUM_THREADS", "3"}});
  EXPECT_EQ(c.get_int("run.threads"), 1);
}

TEST(Config, ResolvedTomlRoundTrips) {
  Config c = load_config("", {"optim.lr=0.1234567891", "model.hidden=[7,5]", "run.name=round"});
  std::string p = write_temp("round.toml", c.to_toml());
  Config d = load_config(p, {});
  EXPECT_EQ(d.to_toml(), c.to_toml());
}

TEST(Config, DocsAreUpToDate) {
  std::ifstream in(std::string(COHORT_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in.good()) << "docs/config.md missing";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, config_reference_markdown())
      << "docs/config.md is stale: run ./build/bin/cohort config docs > docs/config.md";
}

}  // namespace
}  // namespace cohort::train
