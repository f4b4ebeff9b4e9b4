//! The audit trail for people: this replica's audit records, newest
//! first, searchable by time, target, principal and event. Everyone reads
//! their own records; holders of a `[console] auditors` role read
//! everyone's and may verify the hash chain.
//!
//! Files are read backwards, from their end or from where the records
//! older than the page's `before` (or the search's `until`) end, found by
//! bisection; so a page costs what it shows, however far back. A page
//! reads at most [`SCAN_BUDGET`] bytes and says how far back it got; the
//! next page goes on from there. Reading and verifying run on the
//! blocking pool, a few at a time.

use crate::doors::DoorSections;
use crate::pipeline::RequestContext;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use http::Response;
use maud::{html, Markup};

use crate::audit::chain::{self, Problem, Report};
use crate::audit::query::{parse_time, Filter};
use crate::audit::record::Entry;
use crate::pipeline::Gateway;

use super::page;

/// Bytes of audit files one search reads at most.
pub const SCAN_BUDGET: u64 = 32 * 1024 * 1024;
/// Bytes read from a file at a time.
const CHUNK: u64 = 1024 * 1024;
const DEFAULT_ROWS: usize = 100;
const MAX_ROWS: usize = 1000;
const MAX_FIELD: usize = 256;

/// One identity whose records are a viewer's own: the `auth`, `principal`
/// and `issuer` its records carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub auth: String,
    pub principal: String,
    pub issuer: Option<String>,
}

impl Identity {
    /// From `Principal::identity`'s text (`basic:alice`,
    /// `bearer:<iss> alice`, `bearer:- alice` without `iss`).
    pub fn parse(text: &str) -> Option<Identity> {
        let (auth, rest) = text.split_once(':')?;
        let (issuer, principal) = match auth {
            "bearer" => {
                let (iss, sub) = rest.split_once(' ')?;
                ((iss != "-").then(|| iss.to_string()), sub)
            }
            _ => (None, rest),
        };
        Some(Identity {
            auth: auth.to_string(),
            principal: principal.to_string(),
            issuer,
        })
    }

    fn wrote(&self, e: &Entry) -> bool {
        e.auth.as_deref() == Some(self.auth.as_str())
            && e.principal.as_deref() == Some(self.principal.as_str())
            && e.issuer == self.issuer
    }
}

/// Whose records a viewer reads.
#[derive(Debug, Clone)]
pub enum Reader {
    /// Holds an auditor role whole: everyone's, and the chain.
    Auditor,
    /// Its own: the records of its identities (its own, or a person's of
    /// `[[access.people]]`), and with `targets` also those about these
    /// targets (an auditor role held narrowed, to a namespace: it reaches
    /// that namespace's records only). No identity: nothing of its own.
    Own {
        name: String,
        identities: Vec<Identity>,
        targets: Option<Arc<std::collections::HashSet<String>>>,
    },
}

impl Reader {
    /// Whether it reads others' records (and may filter by principal).
    pub fn reads_others(&self) -> bool {
        match self {
            Reader::Auditor => true,
            Reader::Own { targets, .. } => targets.is_some(),
        }
    }

    fn reads(&self, e: &Entry) -> bool {
        match self {
            Reader::Auditor => true,
            Reader::Own {
                identities,
                targets,
                ..
            } => {
                identities.iter().any(|i| i.wrote(e))
                    || targets
                        .as_ref()
                        .zip(e.target.as_ref())
                        .is_some_and(|(t, target)| t.contains(target))
            }
        }
    }
}

/// What the page asks (`?since=&until=&target=&principal=&event=&before=&limit=&verify=1`).
#[derive(Debug)]
pub struct TrailQuery {
    pub since: String,
    pub until: String,
    pub target: String,
    pub principal: String,
    pub event: String,
    /// Records before this seq (the next page).
    pub before: Option<u64>,
    pub limit: usize,
    pub verify: bool,
    pub filter: Filter,
    /// Whose records these may be.
    pub reader: Reader,
}

impl TrailQuery {
    /// Reads the query for `reader`. `Err`: the status and what is wrong.
    pub fn parse(query: Option<&str>, reader: Reader) -> Result<TrailQuery, (u16, String)> {
        let bad = |why: String| (400, why);
        let mut q = TrailQuery {
            since: String::new(),
            until: String::new(),
            target: String::new(),
            principal: String::new(),
            event: String::new(),
            before: None,
            limit: DEFAULT_ROWS,
            verify: false,
            filter: Filter::default(),
            reader,
        };
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if value.len() > MAX_FIELD {
                return Err(bad(format!("{key}: at most {MAX_FIELD} bytes")));
            }
            let value = value.trim().to_string();
            match key.as_ref() {
                "since" => q.since = value,
                "until" => q.until = value,
                "target" => q.target = value,
                "principal" => q.principal = value,
                "event" => q.event = value,
                "before" if !value.is_empty() => {
                    q.before = Some(
                        value
                            .parse()
                            .map_err(|_| bad(format!("before={value}: a record's seq")))?,
                    )
                }
                "limit" => {
                    q.limit = match value.parse::<usize>() {
                        Ok(n @ 1..=MAX_ROWS) => n,
                        _ => return Err(bad(format!("limit: a number from 1 to {MAX_ROWS}"))),
                    }
                }
                "verify" => q.verify = value == "1",
                _ => {}
            }
        }
        if let Reader::Own { name, .. } = &q.reader {
            if !q.reader.reads_others() && !q.principal.is_empty() && q.principal != *name {
                return Err((
                    403,
                    "You read your own audit records only; an auditor role reads everyone's."
                        .into(),
                ));
            }
            if q.verify {
                return Err((403, "Verifying the chain is for auditor roles.".into()));
            }
        }
        let time = |field: &str, text: &str| {
            if text.is_empty() {
                Ok(None)
            } else {
                parse_time(text)
                    .map(Some)
                    .map_err(|e| bad(format!("{field}: {e}")))
            }
        };
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        q.filter = Filter {
            since: time("since", &q.since)?,
            until: time("until", &q.until)?,
            target: nonempty(&q.target),
            principal: nonempty(&q.principal),
            event: nonempty(&q.event),
            ..Filter::default()
        };
        Ok(q)
    }
}

/// One search's answer.
#[derive(Debug, Default)]
pub struct Found {
    /// Newest first.
    pub rows: Vec<Entry>,
    /// The seq a next page starts before.
    pub next: Option<u64>,
    /// Set when the budget ran out: the time of the oldest record read.
    pub searched_back_to: Option<String>,
}

/// Searches the audit files in `dir`, newest first, for `q`, reading at
/// most `budget` bytes.
pub fn search(dir: &Path, q: &TrailQuery, mut budget: u64) -> std::io::Result<Found> {
    let mut found = Found::default();
    // The time and seq of the oldest record read, where a search that ran
    // out of budget got to.
    let mut oldest_read: Option<(String, u64)> = None;
    let files = chain::files_in(dir)?;
    for file in files.iter().rev() {
        if let (Some(before), Some(first)) = (q.before, chain::first_seq_in_name(file)) {
            if first >= before {
                continue;
            }
        }
        let mut more = false;
        // Where records older than `before` and `until` end: no need to
        // read the newer ones first.
        let from = match end_before(file, q.before, q.filter.until) {
            Ok(from) => from,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let read = backwards(file, from, &mut budget, &mut |line| {
            let Ok(entry) = serde_json::from_slice::<Entry>(line) else {
                return true;
            };
            oldest_read = Some((entry.time.clone(), entry.seq));
            if q.before.is_some_and(|b| entry.seq >= b)
                || !q.filter.matches(&entry)
                || !q.reader.reads(&entry)
            {
                return true;
            }
            if found.rows.len() == q.limit {
                more = true;
                return false;
            }
            found.rows.push(entry);
            true
        });
        match read {
            // A file gone since it was listed (shipped and deleted).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
            Ok(Ended::Stopped) => {
                found.next = more.then(|| found.rows.last().map(|e| e.seq)).flatten();
                return Ok(found);
            }
            Ok(Ended::OutOfBudget) => {
                // The next page goes on from where this one got to.
                found.next = oldest_read.as_ref().map(|(_, seq)| *seq);
                found.searched_back_to = oldest_read.map(|(time, _)| time);
                return Ok(found);
            }
            Ok(Ended::Whole) => {}
        }
    }
    Ok(found)
}

/// How a backward read of a file ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Whole,
    /// `take` said enough.
    Stopped,
    OutOfBudget,
}

/// Bytes a probe of [`end_before`] reads to find one whole record.
const PROBE: u64 = 256 * 1024;

/// The offset in `path` where the records at or past `before` (a seq)
/// or after `until` begin, found by bisection (a file holds its records
/// in the order they were written); the file's end when neither is set.
/// Reading backwards from it skips no record older than both.
fn end_before(
    path: &Path,
    before: Option<u64>,
    until: Option<std::time::SystemTime>,
) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if before.is_none() && until.is_none() {
        return Ok(len);
    }
    let past = |e: &Entry| {
        before.is_some_and(|b| e.seq >= b)
            || until.is_some_and(|u| parse_time(&e.time).is_ok_and(|t| t > u))
    };
    let (mut lo, mut hi) = (0u64, len);
    while hi - lo > PROBE {
        let mid = lo + (hi - lo) / 2;
        // The first whole record after `mid`.
        file.seek(SeekFrom::Start(mid))?;
        let mut buf = vec![0u8; PROBE.min(len - mid) as usize];
        file.read_exact(&mut buf)?;
        let entry = buf.iter().position(|b| *b == b'\n').and_then(|start| {
            let line = &buf[start + 1..];
            let end = line.iter().position(|b| *b == b'\n')?;
            serde_json::from_slice::<Entry>(&line[..end]).ok()
        });
        match entry {
            Some(e) if past(&e) => hi = mid,
            Some(_) => lo = mid,
            // A record longer than a probe: read from here on, as before.
            None => return Ok(hi),
        }
    }
    // The exact start of the first record past, within a probe of `lo`:
    // reading backwards from there cuts no record in two.
    let end = (hi + PROBE).min(len);
    file.seek(SeekFrom::Start(lo))?;
    let mut buf = vec![0u8; (end - lo) as usize];
    file.read_exact(&mut buf)?;
    let mut start = match lo {
        0 => 0,
        _ => match buf.iter().position(|b| *b == b'\n') {
            Some(at) => at + 1,
            None => return Ok(hi),
        },
    };
    while let Some(at) = buf[start..].iter().position(|b| *b == b'\n') {
        let line = &buf[start..start + at];
        if serde_json::from_slice::<Entry>(line).is_ok_and(|e| past(&e)) {
            return Ok(lo + start as u64);
        }
        start += at + 1;
    }
    Ok(if end == len { len } else { hi })
}

/// Gives `take` each line of `path` before offset `from`, last first,
/// reading backwards; `take` returns whether to go on.
fn backwards(
    path: &PathBuf,
    from: u64,
    budget: &mut u64,
    take: &mut dyn FnMut(&[u8]) -> bool,
) -> std::io::Result<Ended> {
    let mut file = std::fs::File::open(path)?;
    let mut pos = from.min(file.metadata()?.len());
    // The start of a line whose beginning is in the chunk before.
    let mut carry: Vec<u8> = Vec::new();
    while pos > 0 {
        if *budget == 0 {
            return Ok(Ended::OutOfBudget);
        }
        let n = CHUNK.min(pos).min(*budget);
        pos -= n;
        *budget -= n;
        file.seek(SeekFrom::Start(pos))?;
        let mut chunk = vec![0u8; n as usize];
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&carry);
        let mut end = chunk.len();
        for i in (0..chunk.len()).rev() {
            if chunk[i] == b'\n' {
                let line = &chunk[i + 1..end];
                if !line.is_empty() && !take(line) {
                    return Ok(Ended::Stopped);
                }
                end = i;
            }
        }
        carry = chunk[..end].to_vec();
    }
    if !carry.is_empty() && !take(&carry) {
        return Ok(Ended::Stopped);
    }
    Ok(Ended::Whole)
}

/// A query string for the page, with `before`.
fn link(base: &str, q: &TrailQuery, before: u64) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("since", &q.since),
        ("until", &q.until),
        ("target", &q.target),
        ("event", &q.event),
    ] {
        if !v.is_empty() {
            s.append_pair(k, v);
        }
    }
    if q.reader.reads_others() && !q.principal.is_empty() {
        s.append_pair("principal", &q.principal);
    }
    if q.limit != DEFAULT_ROWS {
        s.append_pair("limit", &q.limit.to_string());
    }
    s.append_pair("before", &before.to_string());
    format!("{base}/audit?{}", s.finish())
}

/// The page: the search form, the records, and for auditors the chain.
pub fn render(
    base: &str,
    q: &TrailQuery,
    found: &Found,
    verified: Option<&Result<Report, String>>,
) -> Markup {
    let others = q.reader.reads_others();
    let auditor = matches!(q.reader, Reader::Auditor);
    html! {
        form.filters method="get" action={ (base) "/audit" } {
            label { "Since " input type="text" name="since" value=(q.since) placeholder="2026-11-28T09:00:00Z" size="20"; }
            label { "Until " input type="text" name="until" value=(q.until) size="20"; }
            label { "Target " input type="text" name="target" value=(q.target); }
            @if others {
                label { "Principal " input type="text" name="principal" value=(q.principal); }
            }
            label { "Event " input type="text" name="event" value=(q.event) placeholder="request"; }
            button type="submit" { "Search" }
        }
        @if auditor {
            (chain_status(base, verified))
        } @else if others {
            p { "Your own records, and those about the targets your auditor role reaches where you hold it." }
        } @else {
            p { "Your own records. An auditor role reads everyone's." }
        }
        @if found.rows.is_empty() {
            p { "No records match." }
        } @else {
            table.audit {
                thead { tr {
                    th { "seq" } th { "time" } th { "principal" } th { "channel" } th { "event" }
                    th { "target" } th { "what" } th { "decision" } th { "status" } th { "note" }
                } }
                tbody {
                    @for e in &found.rows {
                        tr class=(e.decision.as_deref().unwrap_or("")) {
                            td { (e.seq) }
                            td { (e.time) }
                            td { (e.principal.as_deref().unwrap_or("")) }
                            td { (e.channel.as_deref().unwrap_or("jolokia")) }
                            td { (e.kind.as_deref().map(|k| format!("{} {k}", e.event)).unwrap_or_else(|| e.event.clone())) }
                            td { (e.target.as_deref().unwrap_or("")) }
                            td.what { (what(e)) }
                            td { (e.decision.as_deref().unwrap_or("")) }
                            td { (e.status.map(|s| s.to_string()).unwrap_or_default()) }
                            td.note {
                                (e.note.as_deref().unwrap_or(""))
                                @if let Some(request) = &e.access_request {
                                    " " small.request {
                                        "(" (request)
                                        @if let Some(by) = e.requester.as_deref().filter(|r| Some(*r) != e.principal.as_deref()) {
                                            ", asked by " (by)
                                        }
                                        ")"
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(back) = &found.searched_back_to {
            p.note { "Searched " (SCAN_BUDGET / (1024 * 1024)) " MB of records, back to " (back)
                "; older records are on the next pages." }
        }
        @if let Some(before) = found.next {
            p { a.next href=(link(base, q, before)) { "Older records" } }
        }
    }
}

/// What a record was about: the MBean and its attribute or operation.
fn what(e: &Entry) -> String {
    let member = e.operation.clone().or_else(|| {
        e.attribute.as_ref().map(|a| match a.as_str() {
            Some(s) => s.to_string(),
            None => a.to_string(),
        })
    });
    match (&e.mbean, member) {
        (Some(m), Some(x)) => format!("{m} {x}"),
        (Some(m), None) => m.clone(),
        (None, _) => String::new(),
    }
}

fn chain_status(base: &str, verified: Option<&Result<Report, String>>) -> Markup {
    let r = match verified {
        None => {
            return html! {
                p { a href={ (base) "/audit?verify=1" } { "Verify the chain" }
                    " (reads the whole log on this replica)" }
            }
        }
        Some(Err(why)) => return html! { p.error { (why) } },
        Some(Ok(r)) => r,
    };
    let broken: Vec<String> = r
        .findings
        .iter()
        .filter(|f| f.problem != Problem::TornTail)
        .take(20)
        .map(|f| f.to_string())
        .collect();
    html! {
        section.chain {
            @if r.tampered() {
                p.error { "The chain does not verify: " (r.findings.len()) " findings." }
                ul { @for f in &broken { li { (f) } } }
            } @else {
                p.up { "The chain verifies: " (r.records) " records in " (r.files) " files"
                    @if let (Some(a), Some(b)) = (r.first_seq, r.last_seq) { ", seq " (a) " to " (b) }
                    @if r.findings.iter().any(|f| f.problem == Problem::TornTail) { " (the last write was cut short)" }
                    "." }
            }
        }
    }
}

/// Whose records `viewer` reads: everyone's for an auditor role held
/// whole; else its own identities' (a person's, with `[[access.people]]`),
/// and those about the fleet's targets that an auditor role it holds
/// narrowed (to a namespace) reaches.
fn reader_of(state: &crate::pipeline::state::State, viewer: &RequestContext) -> Reader {
    let auditors = &state.console().auditors;
    let held: Vec<&Arc<crate::access::Role>> = viewer
        .held
        .iter()
        .filter(|r| auditors.contains(&r.name))
        .collect();
    if held
        .iter()
        .any(|r| r.namespace.is_none() && r.granted_on.is_none())
    {
        return Reader::Auditor;
    }
    let targets = (!held.is_empty()).then(|| {
        Arc::new(
            state
                .fleet
                .iter()
                .filter(|t| held.iter().any(|r| r.reaches(t)))
                .map(|t| t.name.clone())
                .collect(),
        )
    });
    Reader::Own {
        name: viewer.principal.name.clone(),
        identities: state
            .access
            .identities_of(&viewer.principal)
            .iter()
            .filter_map(|i| Identity::parse(i))
            .collect(),
        targets,
    }
}

/// The audit trail: the viewer's records, or an auditor's search
/// of everyone's, and the chain's state when asked.
pub(crate) async fn audit_page(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    viewer: &RequestContext,
) -> Response<Body> {
    /// Searches and verifications at once, on the blocking pool.
    static SEARCHING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
    static VERIFYING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    let Some(log) = &gateway.audit else {
        return page::error(
            404,
            "This gateway keeps no audit log ([audit] dir is not set).",
            base,
            who,
        );
    };
    let reader = reader_of(state, viewer);
    if matches!(&reader, Reader::Own { identities, targets: None, .. } if identities.is_empty()) {
        return page::error(
            403,
            "Audit trails are kept by who made them: sign in to read yours.",
            base,
            who,
        );
    }
    let query = match TrailQuery::parse(parts.uri.query(), reader) {
        Ok(q) => Arc::new(q),
        Err((status, why)) => return page::error(status, &why, base, who),
    };
    let dir = log.config.dir.clone();
    let Ok(_searching) = SEARCHING.acquire().await else {
        return page::error(503, "The audit trail is closed.", base, who);
    };
    let searched = {
        let (dir, query) = (dir.clone(), query.clone());
        tokio::task::spawn_blocking(move || search(&dir, &query, SCAN_BUDGET)).await
    };
    let found = match searched {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            tracing::warn!("console audit trail: {}: {e}", dir.display());
            return page::error(500, "The audit files could not be read.", base, who);
        }
        Err(_) => return page::error(500, "The audit search failed.", base, who),
    };
    let verified = if query.verify {
        Some(match VERIFYING.try_acquire() {
            Err(_) => Err("A verification is running; try again shortly.".to_string()),
            Ok(_verifying) => tokio::task::spawn_blocking(move || {
                crate::audit::chain::files_in(&dir).and_then(|f| crate::audit::chain::verify(&f))
            })
            .await
            .map_err(|_| "The verification failed.".to_string())
            .and_then(|r| r.map_err(|e| format!("The audit files could not be read: {e}"))),
        })
    } else {
        None
    };
    if let Err(e) =
        super::audit_listing(gateway, viewer, "audit_trail", 200, found.rows.len()).await
    {
        return page::error(e.status, &e.message, base, who);
    }
    let body = render(base, &query, &found, verified.as_ref());
    page::respond(
        200,
        "text/html; charset=utf-8",
        page::layout("Audit trail", base, who, body).into_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn record(seq: u64, principal: &str, target: &str) -> String {
        serde_json::json!({"seq": seq, "time": format!("2026-11-28T09:{:02}:00Z", seq % 60),
            "event": "request", "principal": principal, "auth": "basic", "target": target,
            "prev": "x"})
        .to_string()
    }

    /// Two audit files with 30 records, alternating principals.
    fn log() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (first, range) in [(1, 1..=15u64), (16, 16..=30)] {
            let mut f = std::fs::File::create(
                dir.path()
                    .join(format!("audit-{first:020}-20261128T090000Z.jsonl")),
            )
            .unwrap();
            for seq in range {
                let who = if seq % 2 == 0 { "ann" } else { "bob" };
                writeln!(f, "{}", record(seq, who, &format!("t{}", seq % 3))).unwrap();
            }
        }
        dir
    }

    fn reader(me: &str, auditor: bool) -> Reader {
        if auditor {
            return Reader::Auditor;
        }
        Reader::Own {
            name: me.into(),
            identities: vec![Identity::parse(&format!("basic:{me}")).unwrap()],
            targets: None,
        }
    }

    fn q(query: &str, me: &str, auditor: bool) -> TrailQuery {
        TrailQuery::parse(Some(query), reader(me, auditor)).unwrap()
    }

    #[test]
    fn newest_first_own_records_paged_across_files() {
        let dir = log();
        let mine = q("limit=4", "ann", false);
        let found = search(dir.path(), &mine, SCAN_BUDGET).unwrap();
        let seqs: Vec<u64> = found.rows.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [30, 28, 26, 24]);
        assert_eq!(found.next, Some(24));
        // Page on, across the file boundary, to the end.
        let mut all = seqs;
        let mut before = found.next;
        while let Some(b) = before {
            let page = search(
                dir.path(),
                &q(&format!("limit=4&before={b}"), "ann", false),
                SCAN_BUDGET,
            )
            .unwrap();
            all.extend(page.rows.iter().map(|e| e.seq));
            before = page.next;
        }
        assert_eq!(all, (1..=15).rev().map(|n| n * 2).collect::<Vec<_>>());
        // An auditor filters by principal and target.
        let found = search(
            dir.path(),
            &q("principal=bob&target=t0", "eve", true),
            SCAN_BUDGET,
        )
        .unwrap();
        let seqs: Vec<u64> = found.rows.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [27, 21, 15, 9, 3]);
    }

    #[test]
    fn a_search_stops_at_its_budget_and_says_how_far_it_got() {
        let dir = log();
        let line = record(30, "ann", "t0").len() as u64 + 1;
        let found = search(dir.path(), &q("", "ann", false), line * 5).unwrap();
        assert!(found.searched_back_to.is_some());
        assert!(found.rows.len() <= 3, "{:?}", found.rows);
        // Page on from where each page got to: every record, once.
        let mut all: Vec<u64> = found.rows.iter().map(|e| e.seq).collect();
        let mut before = found.next;
        let mut pages = 1;
        while let Some(b) = before {
            let page = search(
                dir.path(),
                &q(&format!("before={b}"), "ann", false),
                line * 5,
            )
            .unwrap();
            all.extend(page.rows.iter().map(|e| e.seq));
            before = page.next;
            pages += 1;
            assert!(pages < 100, "paging goes on: {all:?}");
        }
        assert_eq!(all, (1..=15).rev().map(|n| n * 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_grant_names_who_asked_beside_who_granted() {
        let granted: Entry = serde_json::from_value(serde_json::json!({
            "seq": 3, "time": "T", "event": "access_granted", "principal": "lead",
            "note": "role ops: approved (1 of 1)", "access_request": "ar-1", "requester": "dev", "prev": "0"
        }))
        .unwrap();
        let asked: Entry = serde_json::from_value(serde_json::json!({
            "seq": 2, "time": "T", "event": "access_requested", "principal": "dev",
            "note": "role ops: asked for 30m", "access_request": "ar-1", "requester": "dev", "prev": "0"
        }))
        .unwrap();
        let found = Found {
            rows: vec![granted, asked],
            ..Found::default()
        };
        let html = render("/console", &q("", "eve", true), &found, None).into_string();
        assert!(
            html.contains(
                "approved (1 of 1) <small class=\"request\">(ar-1, asked by dev)</small>"
            ),
            "{html}"
        );
        assert!(
            html.contains("asked for 30m <small class=\"request\">(ar-1)</small>"),
            "{html}"
        );
    }

    #[test]
    fn only_auditors_see_others_or_verify() {
        let dir = log();
        let own = search(dir.path(), &q("", "ann", false), SCAN_BUDGET).unwrap();
        assert!(own
            .rows
            .iter()
            .all(|e| e.principal.as_deref() == Some("ann")));
        for asked in ["principal=bob", "verify=1"] {
            let (status, _) = TrailQuery::parse(Some(asked), reader("ann", false)).unwrap_err();
            assert_eq!(status, 403, "{asked}");
        }
        assert_eq!(q("", "eve", true).filter.principal, None);
        // Another method's ann is not this ann.
        let other = Reader::Own {
            name: "ann".into(),
            identities: vec![Identity::parse("bearer:https://idp.example ann").unwrap()],
            targets: None,
        };
        let theirs = search(
            dir.path(),
            &TrailQuery::parse(None, other).unwrap(),
            SCAN_BUDGET,
        );
        assert!(theirs.unwrap().rows.is_empty());
        // An auditor role held narrowed reads its targets' records too.
        let narrowed = Reader::Own {
            name: "eve".into(),
            identities: vec![],
            targets: Some(Arc::new(["t1".to_string()].into_iter().collect())),
        };
        let found = search(
            dir.path(),
            &TrailQuery::parse(None, narrowed).unwrap(),
            SCAN_BUDGET,
        );
        let found = found.unwrap();
        assert!(!found.rows.is_empty());
        assert!(found.rows.iter().all(|e| e.target.as_deref() == Some("t1")));
        let (status, why) =
            TrailQuery::parse(Some("since=yesterday"), reader("eve", true)).unwrap_err();
        assert_eq!(status, 400);
        assert!(why.contains("since"), "{why}");
    }

    #[test]
    fn a_search_far_back_in_a_big_file_starts_where_its_records_are() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join("audit-00000000000000000001-20261128T090000Z.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        let records = 50_000u64;
        for seq in 1..=records {
            writeln!(f, "{}", record(seq, "ann", "t")).unwrap();
        }
        drop(f);
        let size = std::fs::metadata(&path).unwrap().len();
        let line = size / records;
        // A budget of a few pages of records, far smaller than the file.
        let budget = (2 * PROBE).max(line * 50);
        assert!(budget < size / 4, "the file is larger than the budget");
        let found = search(dir.path(), &q("limit=10&before=1000", "ann", false), budget).unwrap();
        let seqs: Vec<u64> = found.rows.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (990..1000).rev().collect::<Vec<_>>());
        assert_eq!(found.next, Some(990));
        // Exactly where the records before a seq end.
        let end = end_before(&path, Some(5), None).unwrap();
        let mut seen = Vec::new();
        let mut all = u64::MAX;
        backwards(&path, end, &mut all, &mut |l| {
            seen.push(serde_json::from_slice::<Entry>(l).unwrap().seq);
            true
        })
        .unwrap();
        assert_eq!(seen, [4, 3, 2, 1], "exactly the records before seq 5");
    }

    #[test]
    fn lines_are_read_backwards_whole_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let long = "y".repeat(CHUNK as usize + 10);
        std::fs::write(&path, format!("a\n{long}\nb\nlast-without-newline")).unwrap();
        let mut seen = Vec::new();
        let mut budget = u64::MAX;
        let read = backwards(&path, u64::MAX, &mut budget, &mut |l| {
            seen.push(String::from_utf8_lossy(l).len());
            true
        })
        .unwrap();
        assert_eq!(read, Ended::Whole);
        assert_eq!(seen, ["last-without-newline".len(), 1, long.len(), 1]);
    }
}
