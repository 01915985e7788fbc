#include "cohort/train/components.h"

#include "cohort/data/fashion_mnist.h"
#include "cohort/data/synthetic.h"
#include "cohort/data/text.h"
#include "cohort/nn/models/cnn.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/nn/models/sequential.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/pipeline/model_parallel_strategy.h"
#include "cohort/parallel/strategy_registry.h"
#include "cohort/train/extensions.h"

namespace cohort::train {

void check_combination(const Config& cfg) {
  const std::string& model = cfg.get_string("model.type");
  const std::string& dataset = cfg.get_string("data.dataset");
  bool lm = model == "gpt";
  // A registered model or data set knows what it takes (train/extensions.h); a sequential
  // model is built for whatever data it gets (and says when its layers do not fit).
  const bool registered =
      is_registered_model(model) || is_registered_dataset(dataset) || model == "sequential";
  COHORT_CHECK_ARG(
      registered || lm == (dataset == "text"), "config: model.type = \"", model,
      "\" cannot train on data.dataset = \"", dataset, "\" (",
      lm ? "a GPT needs data.dataset = \"text\"" : "text data needs model.type = \"gpt\"", ")");
  if (lm) {
    COHORT_CHECK_ARG(cfg.get_int("model.n_embd") % cfg.get_int("model.n_head") == 0,
                     "config: model.n_embd (", cfg.get_int("model.n_embd"),
                     ") must be divisible by model.n_head (", cfg.get_int("model.n_head"), ")");
  }
}

namespace {

// The built-in image data sets: 28x28 grey, 10 classes, flat for the MLP.
ModelInputs builtin_inputs(bool flat) {
  return {flat ? Shape{784} : Shape{1, 28, 28}, 10};
}

// Text: windows of model.block_size byte ids, each predicting the next byte.
ModelInputs text_inputs(const Config& cfg) {
  return {Shape{cfg.get_int("model.block_size")}, 256, true};
}

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace

DataSplits make_data(const Config& cfg, ShardPick pick) {
  const std::string& dataset = cfg.get_string("data.dataset");
  if (dataset == "csv" || dataset == "numpy" || dataset == "image_folder") {
    return make_file_data(cfg, pick);
  }
  if (is_registered_dataset(dataset)) return make_registered_dataset(dataset, cfg);
  bool flat = cfg.get_string("model.type") == "mlp";
  DataSplits d;
  d.inputs = builtin_inputs(flat);
  if (dataset == "fashion_mnist") {
    data::FashionMnistOptions o;
    o.dir = cfg.get_string("data.path");
    o.mean = float(cfg.get_float("data.mean"));
    o.std = float(cfg.get_float("data.std"));
    o.layout = flat ? data::ImageLayout::kFlat : data::ImageLayout::kNCHW;
    d.train = std::make_shared<data::FashionMNIST>(data::FashionMNIST::train(o));
    d.eval = std::make_shared<data::FashionMNIST>(data::FashionMNIST::test(o));
    d.eval_name = "test";
  } else if (dataset == "synthetic") {
    data::SyntheticOptions o;
    o.num_samples = cfg.get_int("data.synthetic_samples");
    o.shape = flat ? Shape{784} : Shape{1, 28, 28};
    o.num_classes = 10;
    o.seed = uint64_t(cfg.get_int("run.seed"));
    // One draw, split: the held-out quarter comes from the same class centres.
    int64_t n_train = o.num_samples;
    o.num_samples += std::max<int64_t>(1, n_train / 4);
    auto all = std::make_shared<data::Synthetic>(o);
    d.train = std::make_shared<data::Subset>(all, 0, n_train);
    d.eval = std::make_shared<data::Subset>(all, n_train, o.num_samples);
    d.eval_name = "test";
  } else {
    std::string path = cfg.get_string("data.path");
    if (path.empty()) path = data::kjv_path();
    data::TextOptions o;
    o.block_size = cfg.get_int("model.block_size");
    o.val_fraction = cfg.get_float("data.val_fraction");
    data::TextSplits s = data::load_text(path, o);
    d.train = std::make_shared<data::TextDataset>(std::move(s.train));
    d.eval = std::make_shared<data::TextDataset>(std::move(s.validation));
    d.is_text = true;
    d.eval_name = "validation";
    d.inputs = text_inputs(cfg);
  }
  return d;
}

ModelInputs model_inputs(const Config& cfg) {
  const std::string& dataset = cfg.get_string("data.dataset");
  if (dataset == "csv" || dataset == "numpy" || dataset == "image_folder") {
    return make_file_data(cfg).inputs;
  }
  if (is_registered_dataset(dataset)) return make_registered_dataset(dataset, cfg).inputs;
  if (dataset == "text") return text_inputs(cfg);
  return builtin_inputs(cfg.get_string("model.type") == "mlp");
}

std::shared_ptr<nn::Module> make_model(const Config& cfg) {
  if (cfg.get_string("model.type") == "gpt") return std::make_shared<nn::GPT>(gpt_options(cfg));
  return make_model(cfg, model_inputs(cfg));
}

std::shared_ptr<nn::Module> make_model(const Config& cfg, const ModelInputs& in) {
  const std::string& type = cfg.get_string("model.type");
  uint64_t seed = uint64_t(cfg.get_int("run.seed"));
  if (type == "gpt") return std::make_shared<nn::GPT>(gpt_options(cfg));
  if (is_registered_model(type)) return make_registered_model(type, cfg, in);
  if (type == "sequential") {
    nn::SequentialOptions o;
    o.layers = cfg.get_string("model.layers");
    o.input = {in.sample_shape, in.tokens, in.classes, in.tokens ? in.classes : 0};
    o.seed = seed;
    COHORT_CHECK_ARG(!o.layers.empty(), "config: model.type = \"sequential\" needs model.layers, ",
                     "e.g. \"flatten; linear 128; relu; linear\" (docs/models.md)");
    return nn::make_sequential(o);
  }
  if (type == "mlp") {
    std::vector<int64_t> sizes{product(in.sample_shape)};
    for (int64_t h : cfg.get_int_list("model.hidden")) sizes.push_back(h);
    sizes.push_back(in.classes);
    return std::make_shared<nn::MLP>(sizes, nn::MlpOptions{seed});
  }
  COHORT_CHECK_ARG(in.sample_shape.size() == 3,
                   "config: model.type = \"cnn\" needs images, but "
                   "the data's samples have shape ",
                   shape_str(in.sample_shape),
                   ": set data.shape = [channels, height, width] (e.g. [1, 28, 28])");
  return std::make_shared<nn::CNN>(nn::CnnOptions{.seed = seed,
                                                  .channels = in.sample_shape[0],
                                                  .height = in.sample_shape[1],
                                                  .width = in.sample_shape[2],
                                                  .classes = in.classes});
}

std::shared_ptr<const parallel::DeviceMesh> make_mesh(const Config& cfg, TrainWorld& world) {
  world.data_rank = world.rank;
  world.data_size = world.size;
  const parallel::MeshShape want{int(cfg.get_int("parallel.dp")), int(cfg.get_int("parallel.pp")),
                                 int(cfg.get_int("parallel.tp"))};
  const std::string& strategy = cfg.get_string("parallel.strategy");
  // The strategy's world hook says whether it runs on a mesh, hands over to one, or refuses it.
  const std::string on_mesh = parallel::strategy_world(strategy).on_mesh;
  if (want.pp * want.tp == 1 && on_mesh != strategy) {
    parallel::resolve_mesh(want, world.size);  // parallel.dp, when given, is every worker
    return nullptr;
  }
  const std::string runner = on_mesh.empty() ? parallel::mesh_strategy() : on_mesh;
  COHORT_CHECK_ARG(!on_mesh.empty(), "config: parallel.pp = ", want.pp,
                   " and parallel.tp = ", want.tp, " split the model over ranks, which the `",
                   runner,
                   "` strategy does (with data parallelism over parallel.dp); parallel.strategy "
                   "= \"",
                   strategy, "\" cannot be combined with it");
  COHORT_CHECK_ARG(cfg.get_string("model.type") == "gpt", "config: parallel.pp and parallel.tp ",
                   "split a GPT (model.type = \"gpt\"), not model.type = \"",
                   cfg.get_string("model.type"), "\"");
  parallel::resolve_mesh(want, world.size);  // the error names the keys before any collective
  COHORT_CHECK_ARG(world.group != nullptr, "config: parallel.strategy = \"", runner, "\" ",
                   "splits the model over several workers; this job has one");
  auto mesh = std::make_shared<parallel::DeviceMesh>(parallel::make_device_mesh(world.group, want));
  world.data_rank = mesh->coord.dp;
  world.data_size = mesh->shape.dp;
  return mesh;
}

std::string strategy_name(const Config& cfg, const parallel::DeviceMesh* mesh) {
  const std::string& named = cfg.get_string("parallel.strategy");
  return mesh ? parallel::strategy_world(named).on_mesh : named;
}

std::shared_ptr<nn::Module> make_model(const Config& cfg, const parallel::DeviceMesh& mesh) {
  const int64_t micro =
      std::max<int64_t>(1, cfg.get_int("data.batch_size") /
                               std::max<int64_t>(1, cfg.get_int("pipeline.micro_batches")));
  return parallel::make_gpt_chunks(gpt_options(cfg), mesh, cfg, micro);
}

nn::GptOptions gpt_options(const Config& cfg) {
  nn::GptOptions o;
  o.n_layer = cfg.get_int("model.n_layer");
  o.n_head = cfg.get_int("model.n_head");
  o.n_embd = cfg.get_int("model.n_embd");
  o.block_size = cfg.get_int("model.block_size");
  o.dropout = cfg.get_float("model.dropout");
  o.seed = uint64_t(cfg.get_int("run.seed"));
  return o;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, nn::Module& model) {
  return make_optimizer(cfg, model.named_parameters());
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, optim::NamedParams params) {
  if (cfg.get_string("optim.name") == "sgd") {
    optim::SgdOptions o;
    o.lr = cfg.get_float("optim.lr");
    o.momentum = cfg.get_float("optim.momentum");
    o.nesterov = cfg.get_bool("optim.nesterov");
    o.weight_decay = cfg.get_float("optim.weight_decay");
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  optim::AdamWOptions o;
  o.lr = cfg.get_float("optim.lr");
  o.betas = {cfg.get_float("optim.beta1"), cfg.get_float("optim.beta2")};
  o.eps = cfg.get_float("optim.eps");
  o.weight_decay = cfg.get_float("optim.weight_decay");
  return std::make_unique<optim::AdamW>(std::move(params), o);
}

std::unique_ptr<optim::LrSchedule> make_schedule(const Config& cfg, int64_t total_steps) {
  const std::string& name = cfg.get_string("optim.schedule");
  double lr = cfg.get_float("optim.lr");
  if (name == "step")
    return std::make_unique<optim::StepLr>(
        optim::StepLrOptions{lr, cfg.get_int("optim.step_size"), cfg.get_float("optim.gamma")});
  if (name == "cosine") {
    // In the config's words, not WarmupCosineLr's: a run of train.epochs can be shorter than
    // the warmup (train.max_steps was checked against it when the config was loaded).
    int64_t warmup = cfg.get_int("optim.warmup_steps"), total = std::max<int64_t>(1, total_steps);
    COHORT_CHECK_ARG(warmup <= total, "config: optim.warmup_steps (", warmup,
                     ") must be <= the run's total steps (", total,
                     ", from train.epochs = ", cfg.get_int("train.epochs"),
                     " and train.max_steps = ", cfg.get_int("train.max_steps"),
                     ") for optim.schedule = \"cosine\": lower optim.warmup_steps to at most ",
                     total, " or raise train.epochs");
    double min_lr = cfg.get_float("optim.min_lr");
    COHORT_CHECK_ARG(min_lr <= lr, "config: optim.min_lr (", min_lr, ") must be <= optim.lr (", lr,
                     ") for optim.schedule = \"cosine\"");
    return std::make_unique<optim::WarmupCosineLr>(
        optim::WarmupCosineOptions{lr, warmup, total, min_lr});
  }
  return std::make_unique<optim::ConstantLr>(lr);
}

}  // namespace cohort::train
