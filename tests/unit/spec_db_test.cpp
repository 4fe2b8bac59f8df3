#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/specs/spec_json.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::specs {
namespace {

const SpecDb& db() {
  static const SpecDb instance = SpecDb::load(data::DataSource::embedded());
  return instance;
}

double peak(std::string_view gpu, Precision p) {
  const auto value = db().get(gpu).peak_tflops(p);
  EXPECT_TRUE(value.has_value()) << gpu << " " << to_string(p);
  return value.value_or(-1);
}

TEST(Precision, RoundTripsNames) {
  for (Precision p : kAllPrecisions) EXPECT_EQ(parse_precision(to_string(p)), p);
  EXPECT_EQ(parse_precision("BF16"), Precision::bf16);
  EXPECT_EQ(parse_precision("fp64_tensor"), Precision::fp64_tensor);
  EXPECT_FALSE(parse_precision("bf17").has_value());
  EXPECT_EQ(peak_unit(Precision::int8), "TOP/s");
}

TEST(SpecDb, HoldsEveryGpuOfTheReferenceCsv) {
  // Every row of shared/reference/gpu_specs.csv, by its name there.
  for (const char* name : {"V100-SXM2-32GB",
                           "T4",
                           "A10",
                           "A100-PCIe-40GB",
                           "A100-SXM4-40GB",
                           "A100-SXM4-80GB",
                           "A100-PCIe-80GB",
                           "L4",
                           "L40S",
                           "H100-PCIe-80GB",
                           "H100-SXM5-80GB",
                           "H100-NVL-94GB",
                           "H800-SXM5-80GB",
                           "H20",
                           "H200-SXM-141GB",
                           "H200-NVL-141GB",
                           "B200",
                           "GB200 (per GPU, NVL72)",
                           "MI300X",
                           "MI325X"}) {
    const GpuSpec* spec = db().find(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_EQ(spec->name, name);
  }
  EXPECT_EQ(db().all().size(), 20u);
}

TEST(SpecDb, DensePeaksMatchTheReference) {
  EXPECT_DOUBLE_EQ(peak("H200-SXM-141GB", Precision::bf16), 989.4);
  EXPECT_DOUBLE_EQ(peak("H200-SXM-141GB", Precision::fp8), 1978.9);
  EXPECT_DOUBLE_EQ(peak("H100-SXM5-80GB", Precision::bf16), 989.4);
  EXPECT_DOUBLE_EQ(peak("H100-PCIe-80GB", Precision::bf16), 756);
  EXPECT_DOUBLE_EQ(peak("H100-NVL-94GB", Precision::bf16), 835.5);
  EXPECT_DOUBLE_EQ(peak("A100-SXM4-80GB", Precision::bf16), 312);
  EXPECT_DOUBLE_EQ(peak("B200", Precision::fp4), 9000);
  EXPECT_DOUBLE_EQ(peak("MI300X", Precision::bf16), 1307.4);
  EXPECT_DOUBLE_EQ(peak("H800-SXM5-80GB", Precision::fp64), 1);  // datasheet, not TechPowerUp's ~30
}

TEST(SpecDb, NoDenseFigureIsAKnownSparseOne) {
  // Datasheet "with sparsity" figures that must never appear as dense peaks.
  EXPECT_NE(peak("H100-SXM5-80GB", Precision::bf16), 1979);
  EXPECT_NE(peak("H100-SXM5-80GB", Precision::fp16), 1979);
  EXPECT_NE(peak("H100-SXM5-80GB", Precision::fp8), 3958);
  EXPECT_NE(peak("H100-SXM5-80GB", Precision::int8), 3958);
  EXPECT_NE(peak("H100-SXM5-80GB", Precision::tf32), 989);
  EXPECT_NE(peak("H200-SXM-141GB", Precision::bf16), 1979);
  EXPECT_NE(peak("A100-SXM4-80GB", Precision::bf16), 624);
  EXPECT_NE(peak("L40S", Precision::fp8), 1466);
  EXPECT_NE(peak("B200", Precision::bf16), 4500);
  EXPECT_NE(peak("H100-NVL-94GB", Precision::bf16), 1671);
  // A sparse figure stored as dense would break the fixed rate ladder: FP8 is twice BF16, never more.
  for (const auto& spec : db().all()) {
    if (spec.peak(Precision::bf16) && spec.peak(Precision::fp8)) {
      EXPECT_NEAR(*spec.peak_tflops(Precision::fp8) / *spec.peak_tflops(Precision::bf16), 2.0, 0.1) << spec.name;
    }
  }
}

TEST(SpecDb, AbsentPrecisionsAreAbsentNotZero) {
  EXPECT_FALSE(db().get("A100-SXM4-80GB").peak(Precision::fp8).has_value());
  EXPECT_FALSE(db().get("V100-SXM2-32GB").peak(Precision::int8).has_value());
  EXPECT_FALSE(db().get("H100-SXM5-80GB").peak(Precision::fp4).has_value());
  for (const auto& spec : db().all()) {
    for (Precision p : kAllPrecisions) {
      if (spec.peak(p)) EXPECT_GT(spec.peak(p)->value, 0) << spec.name << " " << to_string(p);
    }
  }
}

TEST(SpecDb, H800HasTheReducedNvlink) {
  EXPECT_DOUBLE_EQ(db().get("H800-SXM5-80GB").scale_up_bw_gbs_bidir->value, 400);
  EXPECT_DOUBLE_EQ(db().get("H100-SXM5-80GB").scale_up_bw_gbs_bidir->value, 900);
  EXPECT_EQ(db().get("H800").scale_up_label(), "NVLink4");
  EXPECT_EQ(db().get("MI300X").scale_up_label(), "Infinity Fabric");
  EXPECT_EQ(db().get("L4").scale_up_label(), "none");
}

TEST(SpecDb, FindsAliases) {
  EXPECT_EQ(db().get("h100").name, "H100-SXM5-80GB");
  EXPECT_EQ(db().get("H100 SXM").name, "H100-SXM5-80GB");
  EXPECT_EQ(db().get("h100-sxm5-80gb").name, "H100-SXM5-80GB");
  EXPECT_EQ(db().get("NVIDIA H100 80GB HBM3").name, "H100-SXM5-80GB");
  EXPECT_EQ(db().get("NVIDIA H200").name, "H200-SXM-141GB");
  EXPECT_EQ(db().get("h200-nvl").name, "H200-NVL-141GB");
  EXPECT_EQ(db().get("NVIDIA A100-SXM4-80GB").name, "A100-SXM4-80GB");
  EXPECT_EQ(db().get("AMD Instinct MI300X").name, "MI300X");
  EXPECT_EQ(db().get("gb200").name, "GB200 (per GPU, NVL72)");
  EXPECT_EQ(db().find("h100x"), nullptr);
}

TEST(SpecDb, UnknownNameThrowsWithSuggestions) {
  try {
    db().get("h10");
    FAIL() << "expected NotFoundError";
  } catch (const NotFoundError& e) {
    EXPECT_EQ(e.exit_code(), ExitCode::usage);
    ASSERT_FALSE(e.suggestions().empty());
    EXPECT_NE(std::string(e.what()).find("H100"), std::string::npos) << e.what();
  }
}

TEST(SpecDb, MatchesLocalDevices) {
  constexpr std::uint64_t kMiB = 1024ull * 1024;
  // PCI device id first.
  EXPECT_EQ(db().match_device("whatever", 0x2335, 143771 * kMiB)->name, "H200-SXM-141GB");
  EXPECT_EQ(db().match_device("NVIDIA H100 80GB HBM3", 0x2330, 81559 * kMiB)->name, "H100-SXM5-80GB");
  EXPECT_EQ(db().match_device("", 0x20b0, std::nullopt)->name, "A100-SXM4-40GB");
  // Then the driver's name.
  EXPECT_EQ(db().match_device("NVIDIA H200", std::nullopt, 143771 * kMiB)->name, "H200-SXM-141GB");
  EXPECT_EQ(db().match_device("NVIDIA B200", std::nullopt, 182631 * kMiB)->name, "B200");
  EXPECT_EQ(db().match_device("NVIDIA A100-SXM4-40GB", 0x9999, 40536 * kMiB)->name, "A100-SXM4-40GB");
  // Then memory size: a generic name resolves to the variant whose memory fits.
  EXPECT_EQ(db().match_device("A100-SXM", std::nullopt, 40536 * kMiB)->name, "A100-SXM4-40GB");
  EXPECT_EQ(db().match_device("A100-SXM", std::nullopt, 81920 * kMiB)->name, "A100-SXM4-80GB");
  // A driver name that contains a known one.
  EXPECT_EQ(db().match_device("NVIDIA H100 NVL", std::nullopt, 95830 * kMiB)->name, "H100-NVL-94GB");
  // Nothing fits.
  EXPECT_EQ(db().match_device("NVIDIA GeForce RTX 4090", std::nullopt, 24564 * kMiB), nullptr);
  EXPECT_EQ(db().match_device("Tesla V100-SXM2-16GB", std::nullopt, 16160 * kMiB), nullptr);
}

TEST(SpecDb, EveryFigureHasASource) {
  for (const auto& spec : db().all()) {
    EXPECT_FALSE(spec.default_source.empty()) << spec.name;
    int figures = 0;
    for (const auto& field : figure_fields()) {
      if (const Figure* figure = find_figure(spec, field.key)) {
        ++figures;
        EXPECT_FALSE(figure->source.empty()) << spec.name << " " << field.key;
      }
    }
    EXPECT_GE(figures, 8) << spec.name;
    for (const auto& p : spec.purchase_prices) EXPECT_FALSE(p.source.empty()) << spec.name;
    for (const auto& c : spec.cloud_prices) EXPECT_FALSE(c.source.empty()) << spec.name;
  }
}

TEST(SpecDb, CarriesUncertaintyFromTheCsv) {
  EXPECT_TRUE(db().get("T4").memory_bandwidth_gbs.is_uncertain());
  EXPECT_TRUE(db().get("H800").peak(Precision::fp64)->is_uncertain());
  EXPECT_FALSE(db().get("H100").peak(Precision::bf16)->is_uncertain());
  EXPECT_FALSE(db().get("L4").transformer_engine_uncertain.empty());
}

TEST(SpecDb, ComputesDerivedFigures) {
  const GpuSpec& h100 = db().get("h100");
  EXPECT_NEAR(*tflops_per_watt(h100, Precision::bf16), 989.4 / 700, 1e-12);
  EXPECT_NEAR(*usd_per_dense_tflops(h100, Precision::bf16), 31250 / 989.4, 1e-9);
  EXPECT_NEAR(*cloud_usd_per_hr_per_pflops(h100, Precision::bf16), 6.88 / 0.9894, 1e-9);
  EXPECT_FALSE(tflops_per_watt(db().get("a100"), Precision::fp8).has_value());
  EXPECT_FALSE(usd_per_dense_tflops(db().get("MI325X"), Precision::bf16).has_value());  // no price found
  EXPECT_NEAR(*ratio(db().get("h200").memory_gb.value, h100.memory_gb.value), 141.0 / 80, 1e-12);
  EXPECT_FALSE(ratio(1.0, 0.0).has_value());
}

TEST(SpecDb, JsonCarriesSources) {
  const auto json = to_json(db().get("h200"));
  EXPECT_EQ(json["name"], "H200-SXM-141GB");
  EXPECT_DOUBLE_EQ(json["peak_dense_tflops"]["bf16"]["value"].get<double>(), 989.4);
  EXPECT_FALSE(json["peak_dense_tflops"]["bf16"]["source"].get<std::string>().empty());
  EXPECT_TRUE(json["peak_dense_tflops"]["fp4"].is_null());
  EXPECT_EQ(json["pci_device_ids"][0], "0x2335");
}

// ---- bad files: each names the file, the entry and the field -------------------------------------

std::string load_error(const std::string& name) {
  const auto root = std::filesystem::path(GPUSCOUT_TEST_DATA_DIR) / "specs" / name;
  try {
    SpecDb::load(data::DataSource::directory(root));
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << name << ": expected a DataError";
  return {};
}

void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(SpecDbFiles, LoadsAValidDirectory) {
  const auto root = std::filesystem::path(GPUSCOUT_TEST_DATA_DIR) / "specs" / "valid";
  const SpecDb small = SpecDb::load(data::DataSource::directory(root));
  ASSERT_EQ(small.all().size(), 1u);
  EXPECT_EQ(small.get("tgpu").name, "Test-GPU");
  EXPECT_EQ(small.get("tgpu").tdp_w.source, "https://example.com/datasheet");
}

TEST(SpecDbFiles, MissingField) {
  expect_contains(load_error("missing_field"),
                  {"test-gpu.toml", "entry 'Test-GPU'", "field 'memory.bandwidth_gbs'", "missing"});
}

TEST(SpecDbFiles, WrongType) {
  expect_contains(load_error("wrong_type"), {"test-gpu.toml", "entry 'Test-GPU'", "field 'memory.size_gb'", "number"});
}

TEST(SpecDbFiles, UnknownKey) {
  expect_contains(load_error("unknown_key"),
                  {"test-gpu.toml", "entry 'Test-GPU'", "field 'memory.bandwith_gbs'", "unknown field"});
}

TEST(SpecDbFiles, UnknownPrecision) {
  expect_contains(load_error("unknown_precision"),
                  {"test-gpu.toml", "entry 'Test-GPU'", "field 'peak_dense.bf17'", "unknown precision"});
}

TEST(SpecDbFiles, NegativeValue) {
  expect_contains(load_error("negative_value"), {"test-gpu.toml", "entry 'Test-GPU'", "field 'power.tdp_w'", "-700"});
}

TEST(SpecDbFiles, ZeroPeak) {
  expect_contains(load_error("zero_peak"),
                  {"test-gpu.toml", "entry 'Test-GPU'", "field 'peak_dense.fp32'", "leave out"});
}

TEST(SpecDbFiles, UnknownSourceField) {
  expect_contains(load_error("unknown_source_field"),
                  {"test-gpu.toml", "entry 'Test-GPU'", "field 'sources.fields.memory.bandwith_gbs'"});
}

TEST(SpecDbFiles, DuplicateAliasAcrossFiles) {
  expect_contains(load_error("duplicate_alias"), {"second-gpu.toml", "entry 'Second-GPU'", "field 'aliases'",
                                                  "Shared Alias", "First-GPU", "first-gpu.toml"});
}

TEST(SpecDbFiles, SyntaxError) {
  expect_contains(load_error("syntax_error"), {"test-gpu.toml", "syntax error", "line"});
}

}  // namespace
}  // namespace gpuscout::specs
