"""Issue 48's shift bars of a model's rows against SVGP's at the same budget, and the in-domain
coverage bar, from ``avdgp uncertainty`` CSVs:

    python shift_bars.py MODEL.csv SVGP.csv MODEL_LABEL

A split meets the shift bar when the model's 95 % coverage under shift is at least SVGP's
- 0.02 and its shifted NLL at most SVGP's + 0.05 ("nominal": coverage at least min(SVGP's,
0.95) - 0.02); the in-domain bar holds 95 % coverage in 0.92-0.98 and 50 % in 0.45-0.60.
"""

import csv
import sys


def value(row: dict, key: str) -> float:
    return float(row[key])


def mean(rows: list[dict], key: str) -> float:
    return sum(value(row, key) for row in rows) / len(rows)


def in_domain_ok(row: dict) -> bool:
    coverage_95, coverage_50 = value(row, "coverage_95_in"), value(row, "coverage_50_in")
    return 0.92 <= coverage_95 <= 0.98 and 0.45 <= coverage_50 <= 0.60


def summary(name: str, rows: list[dict]) -> str:
    scores = ("nll_shift", "rmse_shift", "coverage_95_shift", "nll_in", "rmse_in")
    means = " ".join(f"{key} {mean(rows, key):.3f}" for key in scores)
    coverage = f"{mean(rows, 'coverage_95_in'):.3f} / {mean(rows, 'coverage_50_in'):.3f}"
    in_domain = sum(in_domain_ok(row) for row in rows)
    return f"{name}: {means}; in-domain 95/50 % {coverage}, bar {in_domain}/{len(rows)}"


def main(model_csv: str, svgp_csv: str, label: str) -> None:
    rows = [row for row in csv.DictReader(open(model_csv)) if row["model"] == label]
    svgp = {row["problem"]: row for row in csv.DictReader(open(svgp_csv)) if row["model"] == "svgp"}
    met = met_nominal = 0
    worst = 0.0
    for row in sorted(rows, key=lambda row: row["problem"]):
        reference = svgp[row["problem"]]
        coverage, svgp_coverage = (value(r, "coverage_95_shift") for r in (row, reference))
        nll, svgp_nll = (value(r, "nll_shift") for r in (row, reference))
        nll_ok = nll <= svgp_nll + 0.05
        met += coverage >= svgp_coverage - 0.02 and nll_ok
        met_nominal += coverage >= min(svgp_coverage, 0.95) - 0.02 and nll_ok
        worst = max(worst, nll / svgp_nll)
        print(
            f"{row['problem']:15s} nll {nll:.3f} ({svgp_nll:.3f}) coverage {coverage:.3f} "
            f"({svgp_coverage:.3f}) in-domain 95/50 % {value(row, 'coverage_95_in'):.2f} / "
            f"{value(row, 'coverage_50_in'):.2f} best epoch {row['best_epoch']}"
        )
    print(
        f"{label}: shift bar {met}/{len(rows)} (nominal {met_nominal}/{len(rows)}), "
        f"worst NLL / SVGP's {worst:.2f}"
    )
    print(summary(label, rows))
    print(summary("svgp", [svgp[row["problem"]] for row in rows]))


if __name__ == "__main__":
    main(*sys.argv[1:4])
