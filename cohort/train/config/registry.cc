// Declarations of every `cohort train` key: the single source of docs/config.md.
#include "cohort/train/config/train_config.h"

#include "cohort/train/config/extension_registry.h"

namespace cohort::train {
namespace {

using T = ConfigType;
using Strings = std::vector<std::string>;

void add_run_keys(ConfigRegistry& r) {
  r.add({"run.name", T::kString, std::string(""),
         "Run name; the run directory is `run.dir/run.name`. Empty: the config file's stem. A "
         "fresh run whose directory holds an earlier run writes `run.name.2`, `.3`, ... "
         "instead (docs/training.md)."});
  r.add({"run.dir", T::kString, std::string("runs"), "Parent directory of run directories."});
  r.add({"run.seed",
         T::kInt,
         int64_t(0),
         "Seed for initialisation, shuffling and dropout.",
         "",
         {},
         0.0});
  r.add({"run.device",
         T::kString,
         std::string("cpu"),
         "Where the model trains: `cpu`, or `cuda` (GPU 0 of those visible; a build with CUDA "
         "and one worker, docs/gpu.md). Ops without a GPU kernel yet stop the run naming "
         "themselves.",
         "",
         {"cpu", "cuda"}});
  r.add({"run.threads",
         T::kInt,
         int64_t(0),
         "Intra-op threads per worker; 0 means cores divided by local workers.",
         "COHORT_NUM_THREADS",
         {},
         0.0,
         1024.0});
  r.add({"run.memory_limit_mb",
         T::kInt,
         int64_t(0),
         "Most tensor memory (MiB) each worker process may hold: parameters, gradients, "
         "optimizer state, communication buffers and activations together (docs/memory.md). "
         "An allocation past it fails with an error naming this key; 0: no limit.",
         "",
         {},
         0.0});
  r.add({"run.log_every",
         T::kInt,
         int64_t(50),
         "Steps between metric lines (and plain progress lines when not on a terminal).",
         "",
         {},
         1.0});
  r.add({"run.progress",
         T::kString,
         std::string("auto"),
         "Progress output: a live bar on a terminal (`auto`), always `bar`, `plain` lines, or "
         "`none`.",
         "",
         {"auto", "bar", "plain", "none"}});
  r.add({"run.trace", T::kBool, false,
         "Write a timeline of every rank (forward/backward per module, each DDP bucket's "
         "allreduce, optimizer, data, checkpoints, evaluation) to `trace.json` in the run "
         "directory, for ui.perfetto.dev or chrome://tracing (docs/monitoring.md)."});
  r.add({"run.trace_max_events",
         T::kInt,
         int64_t(1000000),
         "Most trace events kept per rank; later ones are counted as dropped (said in the trace).",
         "",
         {},
         1.0});
  r.add({"run.trace_module_depth",
         T::kInt,
         int64_t(2),
         "Module levels the trace shows forward/backward spans for: 1 the model's children "
         "(`conv1`, `blocks`), 2 also theirs (`blocks.0`, `layers.1`); 0 none.",
         "",
         {},
         0.0});
}

void add_model_keys(ConfigRegistry& r) {
  std::vector<std::string> models = {"mlp", "cnn", "gpt", "sequential"};
  for (const std::string& m : registered_models()) models.push_back(m);
  r.add({"model.type", T::kString, std::string("mlp"),
         "Model architecture: a built-in one, or one a program registered "
         "(train/extensions.h, docs/models.md).",
         "", models});
  r.add({"model.hidden",
         T::kIntList,
         std::vector<int64_t>{512, 256},
         "MLP hidden layer widths (input 784 and output 10 come from the data).",
         "",
         {},
         1.0});
  r.add({"model.layers", T::kString, std::string(""),
         "model.type = `sequential`: its layers in order, `;` or a line between layers "
         "(`conv2d 32 kernel=3; relu; maxpool 2; flatten; linear`), or a TOML list of strings "
         "or of tables ([[model.layers]] type = \"linear\" out = 128). The input and the last "
         "width come from the data (docs/models.md)."});
  r.add({"model.n_layer", T::kInt, int64_t(4), "GPT: transformer blocks.", "", {}, 1.0});
  r.add({"model.n_head", T::kInt, int64_t(4), "GPT: attention heads per block.", "", {}, 1.0});
  r.add({"model.n_embd",
         T::kInt,
         int64_t(128),
         "GPT: embedding width (divisible by n_head).",
         "",
         {},
         1.0});
  r.add({"model.block_size", T::kInt, int64_t(128), "GPT: context length in bytes.", "", {}, 2.0});
  r.add({"model.dropout", T::kFloat, 0.0, "GPT: dropout probability.", "", {}, 0.0, 0.99});
  r.add({"model.init_from", T::kString, std::string(""),
         "Starting weights: a safetensors file (e.g. saved from PyTorch, or a cohort "
         "checkpoint's model.safetensors). Every tensor of the model must be in it with the "
         "same name and shape, unless model.init_skip leaves it out; float16/bfloat16/float64 "
         "convert. A resumed run starts from its checkpoint instead (docs/models.md)."});
  r.add({"model.init_map", T::kString, std::string(""),
         "model.init_from: renames, comma-separated FROM=TO pairs of name prefixes applied to "
         "the file's tensor names (`features.0.=conv1., classifier.=fc2.`)."});
  r.add({"model.init_skip", T::kString, std::string(""),
         "model.init_from: tensors to leave out, comma-separated names or prefixes ending in "
         "`.` (`fc2.`): the file's are ignored, the model's keep their initialisation (a new "
         "classifier head)."});
}

void add_data_keys(ConfigRegistry& r) {
  std::vector<std::string> datasets = {"fashion_mnist", "text",  "synthetic",
                                       "csv",           "numpy", "image_folder"};
  for (const std::string& d : registered_datasets()) datasets.push_back(d);
  r.add({"data.dataset", T::kString, std::string("fashion_mnist"),
         "Dataset: the built-in ones, `csv` and `numpy` files or an `image_folder` of one's "
         "own (docs/data.md), or one a program registered (train/extensions.h).",
         "", datasets});
  r.add({"data.path", T::kString, std::string(""),
         "fashion_mnist: directory of the IDX .gz files (default: Debian's "
         "/usr/share/datasets/fashion-mnist). text: a text file (default: the King James "
         "Bible from bible-kjv-text). csv: the training file (numeric columns and a label "
         "column). numpy: a .npz with arrays x and y (and x_test, y_test for the test split), "
         "or a directory with x.npy and y.npy. image_folder: the training folder, one "
         "sub-folder of PNG and JPEG images per class."});
  r.add({"data.eval_path", T::kString, std::string(""),
         "csv, numpy: the evaluation split's file. Empty: a .npz's x_test and y_test if it has "
         "them, else the last data.val_fraction of the training rows (so shuffle a sorted "
         "file). image_folder: the test folder, its sub-folders among the training folder's "
         "classes; empty: data.val_fraction of the images, spread evenly over the classes."});
  r.add({"data.label_column", T::kString, std::string(""),
         "csv: the label column: its header name, or its 0-based number; empty: the last."});
  r.add({"data.header",
         T::kString,
         std::string("auto"),
         "csv: whether the first row names the columns; `auto`: when any of its fields is not "
         "a number.",
         "",
         {"auto", "true", "false"}});
  r.add({"data.shape",
         T::kIntList,
         std::vector<int64_t>{},
         "csv, numpy: one sample's shape for the model, e.g. [1, 28, 28] (channels, height, "
         "width) for model.type = `cnn` on flat rows; empty: as the file has it.",
         "",
         {},
         1.0});
  r.add({"data.image_size",
         T::kIntList,
         std::vector<int64_t>{},
         "image_folder: [height, width] every image is resized to (bilinear); empty: the first "
         "image's size.",
         "",
         {},
         1.0});
  r.add({"data.channels",
         T::kInt,
         int64_t(0),
         "image_folder: channels of a sample: 1 (luminance), 2 (luminance, alpha), 3 (RGB), 4 "
         "(RGBA); 0: 1 when the first image is gray, else 3.",
         "",
         {},
         0.0,
         4.0});
  r.add({"data.batch_size",
         T::kInt,
         int64_t(64),
         "Samples per micro-batch per worker. A step's global batch is data.batch_size x "
         "workers x train.grad_accum_steps: what a resume must keep (or convert to).",
         "",
         {},
         1.0});
  r.add({"data.shuffle", T::kBool, true, "Reshuffle the training set every epoch."});
  r.add({"data.mean", T::kFloat, 0.2860,
         "Normalisation x = (value - mean) / std. fashion_mnist: of pixels scaled to [0, 1] "
         "(the default is the training set's). csv, numpy: of the file's values, applied only "
         "when data.mean or data.std is set. image_folder: the same, of pixels scaled to [0, "
         "1]."});
  r.add({"data.std", T::kFloat, 0.3530, "See data.mean.", "", {}, 1e-6});
  r.add({"data.val_fraction",
         T::kFloat,
         0.1,
         "text: fraction held out for validation (the end of the file). csv, numpy: the same, "
         "of the training rows, when there is no test split. image_folder: of the images, "
         "every 1/fraction-th one, so that each class gives its share.",
         "",
         {},
         0.0001,
         0.9});
  r.add({"data.prefetch",
         T::kInt,
         int64_t(2),
         "Batches prepared ahead by the loader thread (0: none). On a GPU (run.device = "
         "`cuda`) the next step's batches are also copied to it while the current step "
         "computes; 0 turns that off too (docs/gpu.md).",
         "",
         {},
         0.0,
         64.0});
  r.add({"data.synthetic_samples",
         T::kInt,
         int64_t(4096),
         "synthetic: training samples.",
         "",
         {},
         1.0});
}

void add_optim_keys(ConfigRegistry& r) {
  r.add({"optim.name", T::kString, std::string("sgd"), "Optimizer.", "", {"sgd", "adamw"}});
  r.add({"optim.lr", T::kFloat, 0.05, "Peak learning rate.", "", {}, 0.0});
  r.add({"optim.momentum", T::kFloat, 0.9, "SGD momentum.", "", {}, 0.0, 1.0});
  r.add({"optim.nesterov", T::kBool, false, "SGD: Nesterov momentum."});
  r.add({"optim.weight_decay",
         T::kFloat,
         0.0,
         "L2 penalty (SGD) or decoupled weight decay (AdamW).",
         "",
         {},
         0.0});
  r.add({"optim.beta1", T::kFloat, 0.9, "AdamW beta1.", "", {}, 0.0, 1.0});
  r.add({"optim.beta2", T::kFloat, 0.999, "AdamW beta2.", "", {}, 0.0, 1.0});
  r.add({"optim.eps", T::kFloat, 1e-8, "AdamW epsilon.", "", {}, 0.0});
  r.add({"optim.clip_grad_norm",
         T::kFloat,
         0.0,
         "Clip the global gradient norm to this value; 0 disables. DDP clips the averaged "
         "gradient (after the allreduce, the same on every rank); with parallel.strategy = 'ps' "
         "each worker "
         "clips its own gradient before pushing it, and the servers average clipped gradients "
         "(the same as DDP with one worker, or while no worker's norm exceeds the bound).",
         "",
         {},
         0.0});
  r.add({"optim.schedule",
         T::kString,
         std::string("constant"),
         "Learning-rate schedule.",
         "",
         {"constant", "step", "cosine"}});
  r.add({"optim.warmup_steps", T::kInt, int64_t(0), "cosine: linear warmup steps.", "", {}, 0.0});
  r.add({"optim.min_lr", T::kFloat, 0.0, "cosine: final learning rate.", "", {}, 0.0});
  r.add({"optim.step_size", T::kInt, int64_t(1000), "step: steps between decays.", "", {}, 1.0});
  r.add({"optim.gamma", T::kFloat, 0.1, "step: decay factor.", "", {}, 0.0, 1.0});
}

void add_train_keys(ConfigRegistry& r) {
  r.add({"train.epochs", T::kInt, int64_t(1), "Passes over the training set.", "", {}, 1.0});
  r.add({"train.max_steps",
         T::kInt,
         int64_t(0),
         "Stop after this many steps (0: run all epochs). Text data counts steps, not epochs.",
         "",
         {},
         0.0});
  r.add({"train.precision",
         T::kString,
         std::string("f32"),
         "Precision of the matrix products (linear and matmul, forward and backward): `f32`, or "
         "`bf16` (operands rounded to bf16, f32 accumulation; tensor cores on a GPU, emulated "
         "and slower on the CPU). Parameters, gradients and optimizer state stay f32.",
         "",
         {"f32", "bf16"}});
  r.add({"train.grad_accum_steps",
         T::kInt,
         int64_t(1),
         "Micro-batches of data.batch_size per optimizer step (gradient accumulation): the "
         "gradient is their mean; data-parallel strategies communicate once per step.",
         "",
         {},
         1.0});
  r.add({"train.time_limit_s",
         T::kFloat,
         0.0,
         "Stop training after this many seconds (0: no limit), then evaluate.",
         "",
         {},
         0.0});
  r.add({"train.eval_at_start", T::kBool, false,
         "Evaluate once before the first step (logged as after step 0): what weights loaded "
         "with model.init_from score before any training. Not on a resumed run."});
  r.add({"train.eval_every",
         T::kInt,
         int64_t(0),
         "Evaluate every this many steps as well as after each epoch (0: epochs only).",
         "",
         {},
         0.0});
  r.add({"train.eval_batches",
         T::kInt,
         int64_t(0),
         "Batches per evaluation (0: the whole split). An evaluation batch is data.batch_size "
         "sequences on text and max(data.batch_size, 500) images on image data, so 20 batches "
         "evaluate Fashion-MNIST's whole test split (10,000 images).",
         "",
         {},
         0.0});
  r.add({"train.sample_bytes",
         T::kInt,
         int64_t(300),
         "GPT: bytes of text generated at the end of training (0: none).",
         "",
         {},
         0.0});
  r.add({"train.sample_prompt", T::kString, std::string("And God said"),
         "GPT: prompt of the generated sample."});
  r.add({"train.sample_temperature", T::kFloat, 0.8, "GPT: sampling temperature.", "", {}, 0.01});
}

ConfigRegistry build() {
  ConfigRegistry r;
  add_run_keys(r);
  add_model_keys(r);
  add_data_keys(r);
  declare_extension_keys(r);  // the registered models' and data sets' own sections
  add_optim_keys(r);
  add_train_keys(r);
  add_distributed_keys(r);  // train/config/registry_dist.cc
  add_metrics_keys(r);      // train/config/registry_metrics.cc
  add_federated_keys(r);    // train/config/registry_fl.cc
  return r;
}

}  // namespace

std::string config_reference_markdown() {
  return "# Configuration reference\n\n"
         "Generated by `cohort config docs` from the registry in "
         "cohort/train/config/registry.cc; do not edit by hand.\n"
         "Every key can be set in the TOML file (`[section]` then `key = value`) or on the "
         "command line with `--set section.key=value`. Unknown keys are errors.\n" +
         train_registry().markdown();
}

const ConfigRegistry& train_registry() {
  static const ConfigRegistry registry = build();
  return registry;
}

}  // namespace cohort::train
