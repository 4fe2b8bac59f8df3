#pragma once
// gpuscout report: one self-contained HTML file from result files. CSS is inline, charts are inline
// SVG (report/svg_chart.hpp), there is no script and nothing is fetched (a Content-Security-Policy
// forbids it). Sections appear when the records they chart exist: GEMM throughput per precision
// against the spec dense peak, memory bandwidth vs size (L2 and HBM plateaus), host transfers,
// the peer-to-peer matrix, collective busbw vs message size; then a summary of every record, the
// provenance of each file and the definitions of the metrics. Every string from a result file is
// HTML-escaped. Record conventions it reads: docs/report.md; the advice section: docs/advise.md.
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/results/result.hpp"

namespace gpuscout::specs {
class SpecDb;
}
namespace gpuscout::tco {
class TcoDefaults;
}

namespace gpuscout::report {

struct ReportInput {
  std::string origin;  // the file name, shown in the report
  results::ResultSet result;
};

struct ReportOptions {
  std::string title = "gpuscout report";
  std::string generator;                 // "gpuscout 0.1.0 (abc123)"; shown in the footer
  const specs::SpecDb* specs = nullptr;  // spec peaks where a record does not carry its own
  // TCO defaults (data/tco.toml): with `specs`, the serving section prices each measured load point's
  // output tokens (owning the GPU type, and renting it on demand).
  const tco::TcoDefaults* tco = nullptr;
  std::vector<std::string> banner_notes;  // shown at the top, e.g. "example built from fixture data"
  // The advisor's result (kind "advise", `gpuscout advise --out`): a first section with the ranked
  // options, their reasons, a cost chart by TCO term, the rejections and which figures are measured.
  const ReportInput* advice = nullptr;
};

// Escapes & < > " ' (text and attribute values alike).
std::string html_escape(std::string_view text);

std::string render_html_report(const std::vector<ReportInput>& inputs, const ReportOptions& options);

}  // namespace gpuscout::report
