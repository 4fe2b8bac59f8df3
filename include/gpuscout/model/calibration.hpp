#pragma once
// Efficiency curves that turn spec-sheet peaks into achievable rates: GEMM compute efficiency by
// precision and m (tokens), GEMM weight-streaming efficiency (memory-bound GEMMs), memory-bandwidth
// efficiency by size, host transfers, and the collective α-β model (latency and bus bandwidth).
// Three tiers, always named in a prediction: "measured" (result files of this GPU type), "transferred"
// (measured on another GPU of the same architecture family: compute efficiency shared, peaks from the
// spec, memory-bound curves moved to the target's bandwidth by transfer_stream_curve()),
// "public" (documented public anchors, docs/modeling.md "Calibration"). Pure data and arithmetic.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/results/result.hpp"
#include "gpuscout/specs/gpu_spec.hpp"

namespace gpuscout::specs {
class SpecDb;
}

namespace gpuscout::model {

// (x, efficiency) points, x ascending; interpolated in log2(x), clamped at the ends.
using Curve = std::vector<std::pair<double, double>>;
double interpolate_log2(const Curve& curve, double x);

struct GemmCurve {
  Curve compute;                        // (m, measured FLOP/s / dense peak) over compute-bound shapes
  std::optional<double> weight_stream;  // bytes / time / spec bandwidth over memory-bound shapes (median)
  Curve weight_stream_by_bytes;         // the same by bytes moved (small matrices stream less well), at one row
  // (m, efficiency relative to one row): the median over shapes measured at both of t(1 row) / t(m rows).
  // Memory-bound GEMMs of more rows stream their weights more slowly (cuBLASLt's tiles for 128 rows on
  // the H200: 0.92 of the one-row rate, the median of ten shapes); empty: no such measurements, no
  // correction.
  Curve weight_stream_by_rows;
};

// A collective over the scale-up fabric. Without a measured curve, the α-β line
// t = α + f(n) · S / busbw, with f(n) = 2(n-1)/n for an all-reduce and (n-1)/n for an all-to-all
// (nccl-tests' bus bandwidth). With one (measured records), the time of each measured message size at
// `curve_ranks` ranks, joined by straight lines in bytes (an α-β segment between each two sizes, so NCCL's
// protocol and channel changes with size are followed rather than averaged), held flat below the
// smallest size and continued at busbw past the largest; another rank count n scales it by
// f(n) / f(curve_ranks), i.e. at the same bus bandwidth (ASSUMPTION, as nccl-tests' busbw intends).
struct CollectiveModel {
  double alpha_us = 0;
  double busbw_gbs = 0;
  std::string source;
  std::vector<std::pair<double, double>> time_by_bytes;  // (message bytes, median time us), bytes ascending
  std::int64_t curve_ranks = 2;
};

struct Calibration {
  std::string tier;          // "measured", "transferred" or "public"
  std::string measured_gpu;  // GPU the efficiencies come from (empty for public)
  std::string architecture;  // its architecture family
  // Spec memory bandwidth (GB/s) of measured_gpu, which the memory-bound curves are fractions of; 0 where
  // unknown (a table without it transfers its curves unchanged).
  double bandwidth_gbs = 0;
  std::string source;  // where the numbers come from, for every prediction
  std::vector<std::string> files;
  std::map<std::string, GemmCurve> gemm;  // by precision name ("bf16", "fp8", ...)
  Curve memory;                           // (array bytes, GB/s / spec bandwidth)
  std::optional<double> h2d_gbs, d2h_gbs;
  std::optional<CollectiveModel> allreduce;  // measured; else collective_model() uses the public figures
  std::optional<CollectiveModel> alltoall;   // measured; else alltoall_model() falls back (see there)
  std::vector<std::string> notes;            // what was assumed or transferred

  // Compute efficiency of a GEMM with m rows (tokens) at `precision`. A precision measured only at large
  // m takes the shape of the bf16 curve scaled to its own large-m value; one never measured takes bf16's.
  double gemm_efficiency(specs::Precision precision, double m) const;
  // Bandwidth efficiency of a memory-bound GEMM of m rows moving `bytes` (weights streamed once): the
  // curve by bytes when measured, else the median; times the rows curve at m where there is one.
  double weight_stream_efficiency(specs::Precision precision, double bytes = 0, double m = 1) const;
  // Memory-bandwidth efficiency for `bytes` moved (HBM-sized arrays; small sizes clamp to the first point).
  double memory_efficiency(double bytes) const;
  // Relative error band (fraction) of a figure computed with this calibration: ±10% measured, ±20%
  // transferred, ±30% public (the validation MAPE targets and the spread of public anchors).
  double error_band() const;
};

// Reads data/calibration/*.toml (scripts/make-calibration.py writes them). Throws DataError.
Calibration parse_calibration(const data::DataFile& file);

// Every data/calibration/*.toml of `source` (the embedded H200 table by default).
std::vector<Calibration> load_calibrations(const data::DataSource& source);

// Builds a calibration from result files (gpuscout bench JSON) of one GPU type, with `spec` giving the
// peaks and bandwidth the efficiencies are relative to. `exclude_key` leaves one record out (validation);
// for a collective it leaves out every record of that operation and message size, since its in-place,
// out-of-place and other-dtype twins would otherwise predict it from its own measurement.
// Records of other GPUs (gpus[].spec_name) are ignored. Throws UsageError when nothing usable is found.
Calibration calibration_from_results(const std::vector<results::ResultSet>& sets, const specs::GpuSpec& spec,
                                     const std::string& exclude_key = "");

// Reads result files (gpuscout bench JSON) and builds their calibration for the GPU type they name
// (gpuscout.gpus[].spec_name, looked up in `db`), else for `fallback`; the source reads "measured:
// --calibration FILES (GPU)". UsageError when no GPU is named and there is no fallback; IoError and
// DataError name a bad file.
Calibration calibration_from_files(const std::vector<std::string>& files, const specs::SpecDb& db,
                                   const specs::GpuSpec* fallback);

// Documented public anchors (docs/modeling.md): A100 GEMM 0.33 @ m=64 -> 0.92 @ m=8192 (LLMCompass,
// cuBLAS FP16), HBM 0.8 (aiconfigurator default), weight streaming 0.8. Labelled "public".
Calibration public_calibration(const specs::GpuSpec& target);

// A memory-bound efficiency curve (bytes, fraction of the spec bandwidth) measured on a GPU of
// `from_gbs` moved to one of `to_gbs` of the same family. ASSUMPTION: at its best point the curve streams
// at the family's asymptotic efficiency e_max, and what any smaller transfer takes beyond bytes / (e_max
// x bandwidth) is latency (launch, first bytes, the last wave's tail) that does not scale with the
// bandwidth: 1 / e' = 1 / e_max + (to / from) (1 / e - 1 / e_max). So on a GPU with less bandwidth small
// transfers reach more of it, as the engine's decode steps did on an H100 against an H200 (docs/modeling.md,
// "Memory-bound curves on another bandwidth").
Curve transfer_stream_curve(const Curve& curve, double from_gbs, double to_gbs);

// The calibration for `target`: a measured one of the same GPU, else one of the same architecture
// family (tier "transferred"; its memory-bound curves moved to the target's bandwidth where the table
// names its own), else public_calibration(). `measured` lists the candidates in order; of several
// tables of the family, the one whose bandwidth is nearest the target's (by ratio) is transferred, so
// the least is moved (an H800 takes an H100's table over an H200's); a table that does not name its
// bandwidth comes after those that do, and ties keep the list's order.
Calibration calibration_for(const specs::GpuSpec& target, const std::vector<Calibration>& measured);

// All-reduce α and busbw over `gpus` GPUs of `target`: measured when the calibration has it, else from
// the spec's NVLink bandwidth × a documented efficiency (NVLink4+: 0.82 of the unidirectional bandwidth,
// C01: 365-374 GB/s on 8xH100; NVLink3: 0.58, C02: 174 GB/s on 8xA100), PCIe: 20/45 GB/s (Gen4/5),
// and across nodes (gpus > 8) an InfiniBand figure per GPU (NDR 400: 40 GB/s; HDR 200: 20 GB/s).
CollectiveModel collective_model(const specs::GpuSpec& target, const Calibration& cal, std::int64_t gpus);
// Time of one all-reduce of `bytes` over `gpus` ranks, in seconds (0 for one GPU): the α-β line, or the
// measured curve where the model has one (CollectiveModel).
double allreduce_seconds(const CollectiveModel& model, double bytes, std::int64_t gpus);

// All-to-all α and busbw over `gpus` GPUs: measured when the calibration has it (tier measured), across
// nodes the InfiniBand figure of collective_model(), else the all-reduce figures of collective_model()
// (ASSUMPTION: on NVSwitch, NVLink or PCIe the all-to-all busbw reaches the all-reduce busbw; measured
// on 2 x H200: 339 vs 353 GB/s).
CollectiveModel alltoall_model(const specs::GpuSpec& target, const Calibration& cal, std::int64_t gpus);
// Time of one all-to-all in which every rank sends `bytes` (its whole send buffer, nccl-tests' size),
// in seconds: α + (n-1)/n · bytes / busbw, or the measured curve (0 for one GPU).
double alltoall_seconds(const CollectiveModel& model, double bytes, std::int64_t gpus);

}  // namespace gpuscout::model
