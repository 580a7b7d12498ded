//! The Lakehouse Health Scorecard as a Slack message: Block Kit blocks with a plain-text
//! fallback (pure).
//!
//! Sized within Slack's limits: at most [`MAX_BLOCKS`] blocks (Slack allows 50), section texts
//! under [`MAX_SECTION_CHARS`] (Slack allows 3,000), a header under 150 characters. A table with
//! hundreds of partitions gets its compacted and skipped partitions listed first, as many as fit,
//! and the rest summarized by verdict.

use serde_json::{Value, json};

use crate::profile::MIB;
use crate::report::trim_number;
use crate::report::{LineVerdict, PartitionLine, RunStatus, Scorecard, TableFormat};

/// Blocks per message we use at most.
pub const MAX_BLOCKS: usize = 40;
/// Characters per section text we use at most.
pub const MAX_SECTION_CHARS: usize = 2_900;
/// Partition lines per section block, and characters per line: 4 × 700 stays under
/// [`MAX_SECTION_CHARS`].
const LINES_PER_SECTION: usize = 4;
const MAX_LINE_CHARS: usize = 700;

/// `text` made safe for a Slack `mrkdwn` field: `&`, `<` and `>` are control characters there
/// (`<!channel>` pings a channel, `<https://…|x>` is a link), and partition values, table names
/// and error messages are user data. Applied to every such value put on a card.
pub fn escape_mrkdwn(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn mb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / MIB)
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(max_chars.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// `3.21x measured (projected 3.66x to 11.09x)`, or the projection alone when nothing was
/// measured.
pub fn speedup_text(card: &Scorecard) -> String {
    let projected = format!("{:.2}x to {:.2}x", card.projected_speedup_low, card.projected_speedup_high);
    match card.measured_speedup() {
        Some(x) if card.scan_share < 0.995 => {
            format!("{x:.2}x measured on {:.0}% of the rewritten data (projected {projected})", card.scan_share * 100.0,)
        }
        Some(x) => format!("{x:.2}x measured (projected {projected})"),
        None => format!("{projected} projected (not measured)"),
    }
}

fn retention_text(card: &Scorecard) -> String {
    let mut text = expiry_text(card);
    if card.delete_files_rewritten > 0 {
        text.push_str(&match card.dry_run {
            true => format!(" Would rewrite {} position delete files.", card.delete_files_rewritten),
            false => format!(
                " Rewrote {} position delete files into {}.",
                card.delete_files_rewritten, card.delete_files_written
            ),
        });
    }
    match card.manifests_merged {
        0 => text,
        n => format!(
            "{text} {} {n} small manifests into {}.",
            if card.dry_run { "Would merge" } else { "Merged" },
            card.manifests_written
        ),
    }
}

fn expiry_text(card: &Scorecard) -> String {
    let days = trim_number(card.retention_days);
    let (verb, deleted) = if card.dry_run { ("Would purge", "would be deleted") } else { ("Purged", "deleted") };
    if card.snapshots_expired == 0 {
        format!("No snapshots older than {days} days to expire.")
    } else {
        format!(
            "{verb} {} snapshots older than {days} days; {} unreferenced files {deleted} ({} MiB reclaimed).",
            card.snapshots_expired,
            card.files_deleted,
            mb(card.bytes_reclaimed)
        )
    }
}

fn headline(card: &Scorecard) -> String {
    let format = card.format.name();
    match card.status {
        RunStatus::Optimal => format!(
            "✅ {} table {} is optimal (Average Fragmentation: {:.4}). No compaction needed.",
            card.format.short(),
            escape_mrkdwn(&card.table),
            card.avg_ratio_before
        ),
        RunStatus::DryRun => format!("🧪 {format} Lakehouse Maintenance Plan (dry run)"),
        RunStatus::Maintained => format!("❄️ {format} Lakehouse Compaction Complete"),
        RunStatus::Incomplete => {
            let lost = card.partitions.iter().filter(|l| l.gave_up()).count();
            format!(
                "⚠️ {format} Lakehouse Maintenance Incomplete: {lost} degraded partition{} not compacted (another \
                 writer's commits conflicted)",
                if lost == 1 { "" } else { "s" }
            )
        }
    }
}

/// The plain-text fallback (and notification text): the reference flow's card, with measured
/// figures.
pub fn scorecard_text(card: &Scorecard) -> String {
    if card.status == RunStatus::Optimal {
        return format!(
            "{}\n• *Execution:* {}\n• *Snapshot Retention:* {}",
            headline(card),
            card.execution_id,
            retention_text(card)
        );
    }
    format!(
        "{}\n• *Target Table:* `{}`\n• *Partitions Compacted:* {} of {}\n• *Small Files Eliminated:* {} (< {} MiB)\n\
         • *Volume Consolidated:* {} MiB\n• *Query Scan Speedup:* {}\n• *Snapshot Retention:* {}\n• *Execution:* {}",
        headline(card),
        escape_mrkdwn(&card.table),
        card.partitions_compacted,
        card.partitions.len(),
        card.small_files_eliminated,
        trim_number(card.small_file_threshold_mb),
        mb(card.bytes_consolidated),
        speedup_text(card),
        retention_text(card),
        card.execution_id,
    )
}

fn partition_line(line: &PartitionLine) -> String {
    let icon = match line.verdict {
        LineVerdict::Compacted | LineVerdict::WouldCompact => "🔧",
        LineVerdict::Skipped => "⏭️",
        LineVerdict::Healthy => "✅",
    };
    format!(
        "{icon} `{}` {}: {} → {} files{}, small {} → {}, ratio {:.2} → {:.2}{}{} — {}{}",
        escape_mrkdwn(&line.partition),
        line.verdict.as_str(),
        line.files_before,
        line.files_after,
        // Sizes at a glance (small buckets left of │) where the run changed them.
        if line.verdict == LineVerdict::Compacted && !line.sizes_before.is_empty() {
            format!(" `{}` → `{}`", line.sizes_before, line.sizes_after)
        } else {
            String::new()
        },
        line.small_files_before,
        line.small_files_after,
        line.ratio_before,
        line.ratio_after,
        if line.bytes_consolidated > 0 {
            format!(", {} MiB consolidated", mb(line.bytes_consolidated))
        } else {
            String::new()
        },
        if line.rows_purged > 0 { format!(", {} deleted rows purged", line.rows_purged) } else { String::new() },
        escape_mrkdwn(&line.reason),
        // A given-up partition's reason already tells its commit's story.
        match &line.commit {
            Some(commit) if line.verdict.acts() => format!(" · {}", escape_mrkdwn(commit)),
            _ => String::new(),
        }
    )
}

/// The Block Kit payload of a scorecard.
pub fn scorecard_payload(card: &Scorecard) -> Value {
    let mut blocks = vec![json!({
        "type": "header",
        "text": {"type": "plain_text", "text": truncate(&format!("Lakehouse Health Scorecard ({}): {}", card.format.name(), card.table), 150), "emoji": true}
    })];
    blocks.push(
        json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(&headline(card), MAX_SECTION_CHARS)}}),
    );
    let fields = [
        format!("*Partitions compacted*\n{} of {}", card.partitions_compacted, card.partitions.len()),
        format!(
            "*Small files eliminated*\n{} (< {} MiB)",
            card.small_files_eliminated,
            trim_number(card.small_file_threshold_mb)
        ),
        format!("*Volume consolidated*\n{} MiB", mb(card.bytes_consolidated)),
        format!("*Query scan speedup*\n{}", speedup_text(card)),
        format!("*Fragmentation*\n{:.4} → {:.4} avg", card.avg_ratio_before, card.avg_ratio_after),
        format!("*Snapshot retention*\n{}", retention_text(card)),
    ];
    blocks.push(json!({
        "type": "section",
        "fields": fields.iter().map(|f| json!({"type": "mrkdwn", "text": truncate(f, 1900)})).collect::<Vec<_>>()
    }));
    if !card.warnings.is_empty() {
        let text = card.warnings.iter().map(|w| format!("• {}", escape_mrkdwn(w))).collect::<Vec<_>>().join("\n");
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(&format!("⚠️ *Warnings* (the maintenance stands)\n{text}"), MAX_SECTION_CHARS)}}));
    }
    blocks.push(json!({"type": "divider"}));

    // Partitions: acted-on and skipped first, then healthy; summarize what does not fit.
    let mut ordered: Vec<&PartitionLine> = card.partitions.iter().collect();
    ordered.sort_by_key(|l| match l.verdict {
        LineVerdict::Compacted | LineVerdict::WouldCompact => 0,
        LineVerdict::Skipped => 1,
        LineVerdict::Healthy => 2,
    });
    let room = MAX_BLOCKS.saturating_sub(blocks.len() + 2) * LINES_PER_SECTION;
    let shown = ordered.len().min(room);
    for chunk in ordered[..shown].chunks(LINES_PER_SECTION) {
        let text = chunk.iter().map(|l| truncate(&partition_line(l), MAX_LINE_CHARS)).collect::<Vec<_>>().join("\n");
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}));
    }
    if shown < ordered.len() {
        let rest = &ordered[shown..];
        let count = |v: LineVerdict| rest.iter().filter(|l| l.verdict == v).count();
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": format!(
            "…and {} more partitions ({} compacted, {} skipped, {} healthy).",
            rest.len(),
            count(LineVerdict::Compacted) + count(LineVerdict::WouldCompact),
            count(LineVerdict::Skipped),
            count(LineVerdict::Healthy)
        )}}));
    }
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!(
        "Execution `{}` · {} · {:.1} s · lakehouse {}",
        card.execution_id, card.status.as_str(), card.duration_ms as f64 / 1000.0, env!("CARGO_PKG_VERSION")
    )}]}));
    json!({"text": truncate(&scorecard_text(card), 3_000), "blocks": blocks})
}

/// The failure alert of the reference flow's `errors` branch. A `retryable` failure (a commit
/// conflict with another writer, an interruption: nothing half-committed, the next run plans
/// again) says so instead of reading as a failure of the table.
pub fn failure_payload(table: &str, format: TableFormat, execution_id: &str, error: &str, retryable: bool) -> Value {
    let table = escape_mrkdwn(table);
    let what = format!("{} Lakehouse Maintenance", format.short());
    let text = if retryable {
        format!(
            "⚠️ {what} stopped on execution {execution_id} for table {table}: nothing half-committed, the next \
             run retries."
        )
    } else {
        format!("🚨 {what} failed on execution {execution_id} for table {table}.")
    };
    json!({
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": truncate(&text, MAX_SECTION_CHARS)}},
            {"type": "section", "text": {"type": "mrkdwn", "text": truncate(&format!("```{}```", escape_mrkdwn(error)), MAX_SECTION_CHARS)}},
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(partitions: usize) -> Scorecard {
        Scorecard {
            execution_id: "e-1".into(),
            table: "analytics.events".into(),
            format: TableFormat::Iceberg,
            status: RunStatus::Maintained,
            dry_run: false,
            started_ms: 0,
            duration_ms: 1500,
            small_file_threshold_mb: 64.0,
            fragmentation_ratio_threshold: 0.35,
            retention_days: 7.0,
            partitions: (0..partitions)
                .map(|i| PartitionLine {
                    partition: format!("d=2026-10-{i:03}"),
                    spec_id: 0,
                    verdict: if i % 3 == 0 { LineVerdict::Compacted } else { LineVerdict::Healthy },
                    reason: "r".into(),
                    files_before: 10,
                    files_after: 2,
                    small_files_before: 9,
                    small_files_after: 1,
                    ratio_before: 0.9,
                    ratio_after: 0.5,
                    bytes_consolidated: if i % 3 == 0 { 5 * 1024 * 1024 } else { 0 },
                    rows_purged: if i == 3 { 120 } else { 0 },
                    action: "x".into(),
                    executor: None,
                    executor_reason: None,
                    strategy: None,
                    commit: (i % 3 == 0).then(|| if i == 3 { "retried 2×, committed" } else { "committed" }.into()),
                    sizes_before: "█▃ ▁│▁  ".into(),
                    sizes_after: "    │█  ".into(),
                })
                .collect(),
            partitions_degraded: 1,
            partitions_compacted: 1,
            small_files_eliminated: 8,
            bytes_consolidated: 5 * 1024 * 1024,
            avg_ratio_before: 0.5,
            avg_ratio_after: 0.2,
            projected_speedup_low: 3.66,
            projected_speedup_high: 11.09,
            scan_share: 0.0,
            scan_before: None,
            scan_after: None,
            compaction_snapshot_id: Some(1),
            manifests_merged: 12,
            manifests_written: 1,
            manifest_snapshot_id: Some(2),
            delete_files_rewritten: 0,
            delete_files_written: 0,
            delete_rewrite_snapshot_id: None,
            snapshots_expired: 3,
            files_deleted: 4,
            bytes_reclaimed: 1024 * 1024,
            notification: String::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn purged_rows_are_shown_where_there_are_some() {
        let shown = scorecard_payload(&card(6)).to_string();
        assert_eq!(shown.matches("deleted rows purged").count(), 1, "{shown}");
        assert!(shown.contains("d=2026-10-003") && shown.contains("120 deleted rows purged"), "{shown}");
    }

    #[test]
    fn rewritten_position_deletes_are_shown_where_there_are_some() {
        let mut with = card(3);
        (with.delete_files_rewritten, with.delete_files_written) = (6, 2);
        let shown = scorecard_text(&with);
        assert!(shown.contains("Rewrote 6 position delete files into 2."), "{shown}");
        with.dry_run = true;
        assert!(scorecard_text(&with).contains("Would rewrite 6 position delete files."));
        assert!(!scorecard_text(&card(3)).contains("position delete"));
    }

    #[test]
    fn warnings_are_shown_on_the_card() {
        let mut with = card(3);
        with.warnings = vec!["committed, but metadata/version-hint.text could not be updated".into()];
        let shown = scorecard_payload(&with).to_string();
        assert!(shown.contains("Warnings") && shown.contains("version-hint.text could not be updated"), "{shown}");
        assert!(!scorecard_payload(&card(3)).to_string().contains("Warnings"));
    }

    #[test]
    fn each_partition_shows_what_its_commit_did_and_a_lost_one_makes_the_run_incomplete() {
        let mut c = card(6);
        let shown = scorecard_payload(&c).to_string();
        assert!(shown.contains("· retried 2×, committed") && shown.contains("· committed"), "{shown}");
        assert!(shown.contains("10 → 2 files `█▃ ▁│▁  ` → `    │█  `"), "sizes before → after: {shown}");
        c.status = RunStatus::Incomplete;
        c.partitions[0].verdict = LineVerdict::Skipped;
        c.partitions[0].reason = "skipped: conflict: gave up after 3 attempts (x was removed)".into();
        c.partitions[0].commit = Some("conflict: gave up after 3 attempts (x was removed)".into());
        let shown = scorecard_payload(&c).to_string();
        assert!(shown.contains("Maintenance Incomplete: 1 degraded partition not compacted"), "{shown}");
        assert!(shown.contains("skipped: conflict: gave up after 3 attempts"), "{shown}");
        assert!(!shown.contains("· conflict"), "the reason tells it once: {shown}");
    }

    #[test]
    fn text_carries_the_reference_figures() {
        let text = scorecard_text(&card(3));
        for want in [
            "Compaction Complete",
            "`analytics.events`",
            "Partitions Compacted:* 1 of 3",
            "Small Files Eliminated:* 8 (< 64 MiB)",
            "Volume Consolidated:* 5.00 MiB",
            "3.66x to 11.09x projected",
            "Purged 3 snapshots older than 7 days",
            "Merged 12 small manifests into 1.",
            "e-1",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
    }

    #[test]
    fn hundreds_of_partitions_stay_within_slack_limits() {
        let payload = scorecard_payload(&card(700));
        let blocks = payload["blocks"].as_array().unwrap();
        assert!(blocks.len() <= 50, "{}", blocks.len());
        for b in blocks {
            if let Some(t) = b["text"]["text"].as_str() {
                assert!(t.chars().count() <= 3000);
            }
        }
        let last_sections: String = blocks.iter().filter_map(|b| b["text"]["text"].as_str()).collect();
        assert!(last_sections.contains("more partitions ("), "summarized");
        // The compacted partitions come first.
        let first_list = blocks[4]["text"]["text"].as_str().unwrap();
        assert!(first_list.starts_with("🔧"), "{first_list}");
        assert!(payload["text"].as_str().unwrap().chars().count() <= 3000);
        // Absurdly long partition labels are cut, never dropped into an empty section.
        let mut long = card(5);
        for p in &mut long.partitions {
            p.partition = "k".repeat(5000);
        }
        for b in scorecard_payload(&long)["blocks"].as_array().unwrap() {
            if let Some(t) = b["text"]["text"].as_str() {
                assert!(!t.is_empty() && t.chars().count() <= 3000, "{}", t.len());
            }
        }
    }

    #[test]
    fn user_data_cannot_ping_or_link() {
        let mut evil = card(2);
        evil.table = "ns.<!channel>".into();
        evil.partitions[0].partition = "who=<!here> & <https://x.test|click>".into();
        evil.partitions[1].reason = "skipped: <@U123>".into();
        let all = |v: &Value| v.to_string();
        for payload in [
            scorecard_payload(&evil),
            failure_payload("<!channel>", TableFormat::Delta, "e-1", "bad <!everyone> & co", false),
        ] {
            let mut texts: Vec<String> = vec![payload["text"].as_str().unwrap().to_string()];
            for b in payload["blocks"].as_array().unwrap() {
                if b["type"] == "header" {
                    continue; // plain_text: shown as typed, never parsed
                }
                texts.push(all(b));
            }
            for t in &texts {
                for raw in ["<!channel>", "<!here>", "<!everyone>", "<https://", "<@U123>"] {
                    assert!(!t.contains(raw), "{raw} in {t}");
                }
            }
            let joined = texts.join("\n");
            assert!(
                joined.contains("&lt;!") && joined.contains("&amp;") || joined.contains("&lt;@U123&gt;"),
                "{joined}"
            );
        }
        assert_eq!(escape_mrkdwn("a&b<c>"), "a&amp;b&lt;c&gt;");
    }
}
