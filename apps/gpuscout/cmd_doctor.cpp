// gpuscout doctor: is this machine fit to measure, and will its results compare with others'? Renders
// the findings of gpuscout/doctor/doctor.hpp on the facts doctor_facts.cpp gathers. Reads only: it
// changes no setting.
#include <CLI/CLI.hpp>

#include "context.hpp"
#include "doctor_facts.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "local_gpus.hpp"

namespace gpuscout::cli {

void register_doctor_command(CLI::App& app, AppContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "doctor", "Is this machine fit to measure: build, data, environment, driver, each GPU's state (reads only)");
  auto strict = std::make_shared<bool>(false);
  cmd->add_flag("--strict", *strict, "Exit 1 on warnings too, not only on failures (for scripts that gate a run)");
  cmd->footer(
      "Exit codes: 0 nothing failed; 1 a check failed (with --strict, or warned); 2 usage error. "
      "Statuses: ok, info (worth knowing), warn (results will differ from the hardware's), fail (a "
      "measurement cannot be trusted or run), skip (no reading).");
  cmd->callback([&ctx, strict] {
    const specs::SpecDb* db = nullptr;
    try {
      db = &ctx.specs();
    } catch (const Error&) {
      // gather_doctor_facts reports it as the data finding; GPUs stay unmatched.
    }
    const doctor::Facts facts = gather_doctor_facts(ctx, discover_local_gpus(db));
    const std::vector<doctor::Finding> findings = doctor::examine(facts);
    ctx.out << report::render(doctor::findings_table(findings), ctx.format());
    if (doctor::count(findings, doctor::Status::fail) > 0 ||
        (*strict && doctor::count(findings, doctor::Status::warn) > 0)) {
      ctx.raise_exit_code(ExitCode::failure);
    }
  });
}

}  // namespace gpuscout::cli
