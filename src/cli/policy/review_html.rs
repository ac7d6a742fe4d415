//! The review as one self-contained HTML page: styles and charts inline
//! (SVG drawn here, no script, no network), so a reviewer can open it from
//! a CI artifact. Every figure carries a `data-` attribute or an `id`, so
//! a test can read back what the page shows.

use std::fmt::Write;

use crate::html_text::escape;
use crate::review::Report;

/// One colour per transition kind: openings stand out.
fn colour(transition: &str) -> &'static str {
    match transition {
        "deny->allow" => "#c0392b",
        "deny->ask" => "#e67e22",
        t if t.ends_with("->deny") => "#2c7a4b",
        _ => "#5d6d7e",
    }
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#1c2833;padding:0 1em}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #d5d8dc}\
code{font-size:.9em;background:#f4f6f6;padding:.1em .3em}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #eaeded;vertical-align:top}\
td.count{text-align:right;font-variant-numeric:tabular-nums}\
.verdict{padding:.8em 1em;border-radius:4px;font-weight:600}.opens{background:#fdedec;color:#922b21}.shut{background:#eafaf1;color:#1d6f42}\
.chip{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:middle}\
.muted{color:#717d7e}";

pub fn page(report: &Report) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>portcullis policy review</title><style>{STYLE}</style></head><body>"
    );
    let _ = write!(
        html,
        "<h1>Policy review</h1><p>Candidate <code id=\"candidate-hash\">{}</code> against \
         <code id=\"old-hash\">{}</code> <span class=\"muted\">({})</span></p>",
        escape(&report.candidate.hash),
        escape(&report.old.hash),
        escape(&report.old.source)
    );
    let _ = write!(
        html,
        "<p id=\"verdict\" class=\"verdict {}\" data-opens=\"{}\">{}</p>",
        if report.opens { "opens" } else { "shut" },
        report.opens,
        if report.opens {
            "The candidate opens what the set in force keeps shut."
        } else {
            "The candidate opens nothing."
        }
    );
    proof(&mut html, report);
    replay(&mut html, report);
    chart(&mut html, report);
    let _ = write!(html, "<h2>What the proof covers</h2><ul id=\"bounds\">");
    for bound in &report.proof.bounds {
        let _ = write!(html, "<li>{}</li>", escape(bound));
    }
    html.push_str("</ul></body></html>\n");
    html
}

fn proof(html: &mut String, report: &Report) {
    let proof = &report.proof;
    let _ = write!(
        html,
        "<h2>What the candidate can newly permit (proven)</h2>\
         <p>Proven with SymCC and cvc5 for <span id=\"proven-pairs\">{}</span> action-pass pairs; \
         <span id=\"widening-count\">{}</span> widened.</p>",
        proof.proven,
        proof.widenings.len()
    );
    if !proof.data_widenings.is_empty() {
        html.push_str(
            "<table id=\"data-widenings\"><tr><th>File</th><th>Entry</th><th>What it newly permits</th></tr>",
        );
        for loosening in &proof.data_widenings {
            let _ = write!(
                html,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                escape(&loosening.file),
                escape(&loosening.entry),
                escape(&loosening.change)
            );
        }
        html.push_str("</table>");
    }
    if proof.widenings.is_empty() {
        if proof.data_widenings.is_empty() {
            html.push_str(
                "<p>Nothing: the candidate permits no request the set in force refuses.</p>",
            );
        }
        return;
    }
    html.push_str(
        "<table id=\"widenings\"><tr><th>Action</th><th>Pass</th><th>In force &rarr; candidate</th>\
         <th>A request it newly permits</th></tr>",
    );
    for finding in &proof.widenings {
        let (change, example) = match &finding.counterexample {
            Some(found) => (
                format!("{} &rarr; {}", found.old.as_str(), found.new.as_str()),
                format!(
                    "client <code>{}</code> (tier {}) &rarr; <code>{}</code>{}",
                    escape(&found.client),
                    escape(&found.tier),
                    escape(&found.resource),
                    found
                        .arguments
                        .as_ref()
                        .map(|a| format!(" with <code>{}</code>", escape(&a.to_string())))
                        .unwrap_or_default()
                ),
            ),
            None => (String::new(), String::new()),
        };
        let tool = finding
            .counterexample
            .as_ref()
            .and_then(|c| c.tool.clone())
            .unwrap_or_default();
        let _ = write!(
            html,
            "<tr class=\"widening\" data-action=\"{}\" data-outcome=\"{}\" data-tool=\"{}\">\
             <td><code>{}</code></td><td>{}</td><td>{change}</td><td>{example}</td></tr>",
            escape(&finding.action),
            finding.outcome.as_str(),
            escape(&tool),
            escape(&finding.action),
            finding.outcome.as_str()
        );
    }
    html.push_str("</table>");
}

fn replay(html: &mut String, report: &Report) {
    let replay = &report.replay;
    let _ = write!(
        html,
        "<h2>Recorded decisions that change</h2>\
         <p><span id=\"redecided\">{}</span> decisions of <span id=\"records\">{}</span> records \
         replayed under the candidate: <span id=\"same\">{}</span> the same, \
         <span id=\"changed\">{}</span> changed.</p>",
        replay.redecided, replay.records, replay.same, replay.changed
    );
    if replay.groups.is_empty() {
        return;
    }
    html.push_str(
        "<table id=\"groups\"><tr><th>Change</th><th>Action</th><th>Tool</th><th>Client</th>\
         <th>Decisions</th><th>Seq (first&ndash;last)</th><th>Named by the proof</th></tr>",
    );
    for group in &replay.groups {
        let _ = write!(
            html,
            "<tr class=\"group\" data-transition=\"{t}\" data-tool=\"{tool}\" data-client=\"{client}\" \
             data-count=\"{count}\"><td><span class=\"chip\" style=\"background:{colour}\"></span>{t}</td>\
             <td>{action}</td><td><code>{tool}</code></td><td>{client}</td><td class=\"count\">{count}</td>\
             <td>{first}&ndash;{last}</td><td>{proven}</td></tr>",
            t = escape(&group.transition),
            colour = colour(&group.transition),
            action = group.action.as_str(),
            tool = escape(&group.tool),
            client = escape(&group.client),
            count = group.count,
            first = group.first_seq,
            last = group.last_seq,
            proven = if group.proven { "yes" } else { "no" },
        );
    }
    html.push_str("</table>");
}

/// Changed decisions per time bucket, stacked by transition, as SVG.
fn chart(html: &mut String, report: &Report) {
    let over = &report.replay.over_time;
    if over.series.is_empty() {
        return;
    }
    let _ = write!(html, "<h2>Changed decisions per {}</h2><p>", over.bucket);
    for transition in &over.transitions {
        let _ = write!(
            html,
            "<span class=\"chip\" style=\"background:{}\"></span>{} &nbsp; ",
            colour(transition),
            escape(transition)
        );
    }
    html.push_str("</p>");
    let max = over
        .series
        .iter()
        .map(|b| b.counts.values().sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1);
    let (bar, gap, height, top, left) = (28u64, 24u64, 180u64, 16u64, 36u64);
    let width = left + (bar + gap) * over.series.len() as u64;
    let _ = write!(
        html,
        "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" \
         role=\"img\" aria-label=\"changed decisions over time\">",
        height + top + 40
    );
    for (at, bucket) in over.series.iter().enumerate() {
        let x = left + at as u64 * (bar + gap);
        let mut base = top + height;
        for transition in &over.transitions {
            let count = bucket.counts.get(transition).copied().unwrap_or(0);
            if count == 0 {
                continue;
            }
            let h = (count * height).div_ceil(max);
            base -= h;
            let _ = write!(
                html,
                "<rect class=\"bar\" x=\"{x}\" y=\"{base}\" width=\"{bar}\" height=\"{h}\" \
                 fill=\"{}\" data-start=\"{}\" data-transition=\"{}\" data-count=\"{count}\">\
                 <title>{} {}: {count}</title></rect>",
                colour(transition),
                escape(&bucket.start),
                escape(transition),
                escape(&bucket.start),
                escape(transition)
            );
        }
        let total: u64 = bucket.counts.values().sum();
        let _ = write!(
            html,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{total}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\" fill=\"#717d7e\">{}</text>",
            x + bar / 2,
            base.saturating_sub(3),
            x + bar / 2,
            top + height + 14,
            escape(
                &bucket
                    .start
                    .get(5..16)
                    .unwrap_or(&bucket.start)
                    .replace('T', " ")
            )
        );
    }
    html.push_str("</svg>");
}
