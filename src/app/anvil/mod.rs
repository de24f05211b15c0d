//! `anvil`: one match over the subcommands ([`run`]); each handler opens what its
//! arguments name, calls the library, writes the result and says how it ended ([`Exit`]).

pub mod args;
#[cfg(feature = "analysis")]
pub mod campaign;
#[cfg(feature = "analysis")]
pub mod check;
#[cfg(feature = "analysis")]
pub mod compare;
#[cfg(feature = "analysis")]
pub mod demo;
#[cfg(feature = "object-store")]
pub mod push;
#[cfg(feature = "analysis")]
pub mod report;
#[cfg(feature = "analysis")]
pub mod sql;
#[cfg(feature = "analysis")]
pub mod summary;
pub mod validate;
#[cfg(feature = "analysis")]
pub mod verify;
pub mod worker;

pub use args::{Cli, Command};

use crate::app::Exit;

/// Run one subcommand.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        #[cfg(feature = "object-store")]
        Command::Push(args) => push::run(&args),
        Command::Worker(args) => worker::run(&args),
        Command::Sim { args } => {
            use clap::Parser;
            let argv = std::iter::once("anvil-sim".to_owned()).chain(args);
            match crate::app::sim::Args::try_parse_from(argv) {
                Ok(a) => crate::app::sim::run(a),
                Err(e) if !e.use_stderr() => {
                    crate::app::output::stdout(&e.to_string(), "the simulator's help")?;
                    Ok(Exit::Ok)
                }
                Err(e) => Err(crate::app::AppError::wrap(
                    Exit::BadInput,
                    anyhow::anyhow!("sim: {e}"),
                )),
            }
        }
        #[cfg(feature = "analysis")]
        Command::Sql(args) => sql::run(&args),
        #[cfg(feature = "analysis")]
        Command::Summary(args) => summary::run(&args),
        #[cfg(feature = "analysis")]
        Command::Verify(args) => verify::run(&args),
        #[cfg(feature = "analysis")]
        Command::Compare(args) => compare::run(&args),
        #[cfg(feature = "analysis")]
        Command::Check(args) => check::run(&args),
        #[cfg(feature = "analysis")]
        Command::Report(args) => report::run(&args),
        #[cfg(feature = "analysis")]
        Command::Demo(args) => demo::run(&args),
        #[cfg(feature = "analysis")]
        Command::Campaign(command) => campaign::run(&command),
    }
}

pub use places::{resolve_data, resolve_document, resolve_documents};
#[cfg(feature = "analysis")]
pub use session::{
    Documents, capacity_beside, files_beside, json, load_documents, open_session,
    open_session_materialized, resolve_slos, runtime, say_if_empty,
};

/// What `check`, `compare` and `report` start from: the data folders as local paths, the
/// manifest and the plan, the headline selection the manifest defines, and the SLOs in force.
#[cfg(feature = "analysis")]
pub struct Evidence {
    pub data: Vec<std::path::PathBuf>,
    pub docs: Documents,
    pub selection: crate::rules::HeadlineSelection,
    pub slos: crate::slo::Slos,
}

/// The one prelude of `check`, `compare` and `report`: `folders` (the --data folders and any
/// positional ones) resolved, the documents loaded, the headline selection checked (a
/// manifest that defines none is bad input naming it), the SLOs resolved and said.
#[cfg(feature = "analysis")]
pub fn evidence(
    command: &str,
    args: &args::EvidenceArgs,
    folders: &[std::path::PathBuf],
) -> anyhow::Result<Evidence> {
    let data = resolve_data(folders)?;
    let docs = load_documents(
        command,
        args.manifest.as_deref(),
        args.plan.as_deref(),
        &data,
        args.slo.campaign.as_deref(),
    )?;
    let selection =
        crate::rules::HeadlineSelection::from_manifest(&docs.manifest).map_err(|e| {
            crate::app::AppError::wrap(Exit::BadInput, anyhow::anyhow!("{}: {e}", docs.names[0]))
        })?;
    let slos = resolve_slos(command, &args.slo, &data)?;
    Ok(Evidence {
        data,
        docs,
        selection,
        slos,
    })
}

/// `--data`, the positional folders and the documents as given (paths or URLs) turned into
/// local paths: a remote prefix becomes its mirror (its tables stay remote and are read in
/// place), a remote document its fetched copy. A location that cannot be used is bad input
/// (exit 2) naming the URL and the object.
mod places {
    use std::path::{Path, PathBuf};

    use crate::app::{AppError, Exit};
    use crate::location::Location;

    fn bad(e: crate::location::LocationError) -> anyhow::Error {
        AppError::wrap(Exit::BadInput, anyhow::Error::new(e))
    }

    /// Each of `data` as a local folder: itself, or the mirror of a remote prefix (one line on
    /// standard error says how many artifacts it holds).
    pub fn resolve_data(data: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
        data.iter()
            .map(|given| match Location::parse(given).map_err(bad)? {
                Location::Local(path) => Ok(path),
                #[cfg(feature = "object-store")]
                Location::Remote(remote) => {
                    let mirror =
                        crate::location::block_on(crate::location::mirror(&remote)).map_err(bad)?;
                    eprintln!(
                        "anvil: {}: {} artifact(s); tables read in place, {} small file(s) \
                         fetched into {}",
                        remote.url(),
                        mirror.artifacts,
                        mirror.fetched,
                        crate::location::cache_dir().display()
                    );
                    Ok(mirror.root)
                }
            })
            .collect()
    }

    /// A document as a local file: itself, or its fetched copy. A campaign file's manifest
    /// and plan, named relative to it, are fetched beside its copy.
    pub fn resolve_document(
        given: Option<&Path>,
        campaign: bool,
    ) -> anyhow::Result<Option<PathBuf>> {
        let Some(given) = given else {
            return Ok(None);
        };
        // Only a remote campaign file has documents to fetch beside it.
        #[cfg(not(feature = "object-store"))]
        let _ = campaign;
        match Location::parse(given).map_err(bad)? {
            Location::Local(path) => Ok(Some(path)),
            #[cfg(feature = "object-store")]
            Location::Remote(remote) => {
                let local = crate::location::block_on(crate::location::fetch_document(&remote))
                    .map_err(bad)?;
                if campaign && let Ok(file) = crate::campaign::CampaignFile::load(&local) {
                    for named in [&file.manifest, &file.plan] {
                        if named.is_absolute() {
                            continue;
                        }
                        let url = url::Url::parse(remote.url())
                            .and_then(|u| u.join(&named.to_string_lossy()))
                            .map_err(|e| {
                                bad(crate::location::LocationError::new(
                                    remote.url(),
                                    format!(
                                        "names `{}`, which is no URL beside it: {e}",
                                        named.display()
                                    ),
                                ))
                            })?;
                        let beside = crate::location::Remote::open(url.as_str()).map_err(bad)?;
                        crate::location::block_on(crate::location::fetch_document(&beside))
                            .map_err(bad)?;
                    }
                }
                Ok(Some(local))
            }
        }
    }

    /// `--manifest`, `--plan` and `--campaign` as local files (see [`resolve_document`]).
    pub fn resolve_documents(
        manifest: Option<&Path>,
        plan: Option<&Path>,
        campaign: Option<&Path>,
    ) -> anyhow::Result<[Option<PathBuf>; 3]> {
        Ok([
            resolve_document(manifest, false)?,
            resolve_document(plan, false)?,
            resolve_document(campaign, true)?,
        ])
    }
}

#[cfg(feature = "analysis")]
mod session {
    use std::path::{Path, PathBuf};

    use anyhow::Context;

    use super::args::SloArgs;
    use crate::app::{AppError, Exit};
    use crate::campaign::CampaignFile;
    use crate::manifest::{RunPlan, WorkloadManifest};
    use crate::query::{AnvilSession, QueryError};
    use crate::slo::{SloSource, Slos};

    /// A runtime for the DataFusion work of one command.
    pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(crate::app::STACK_BYTES)
            .build()
            .context("starting the async runtime")
    }

    /// Open the artifacts beneath `data` with the SLOs in force, saying on standard error
    /// when there are none.
    pub async fn open_session(
        command: &str,
        data: &[PathBuf],
        slos: &Slos,
    ) -> Result<AnvilSession, QueryError> {
        let session = AnvilSession::open_with(data, slos, false).await?;
        say_if_empty(command, data, &session)?;
        Ok(session)
    }

    /// [`open_session`] with the per-request views computed once and kept in memory, for
    /// the commands that run many queries over them.
    pub async fn open_session_materialized(
        command: &str,
        data: &[PathBuf],
        slos: &Slos,
    ) -> Result<AnvilSession, QueryError> {
        let session = AnvilSession::open_with(data, slos, true).await?;
        say_if_empty(command, data, &session)?;
        Ok(session)
    }

    /// The SLOs in force for `command` over `data`: the `--slo` flags; else the `slo`
    /// section of `--campaign FILE`; else of a `campaign.json` in a `--data` folder; else
    /// the SLOs the campaign runner recorded in a journal there (`campaign_started.slo`).
    /// What was used is said on standard error. A malformed SLO, or campaign files that
    /// disagree, are bad input (exit 2).
    pub fn resolve_slos(command: &str, args: &SloArgs, data: &[PathBuf]) -> anyhow::Result<Slos> {
        let bad = |e: anyhow::Error| AppError::wrap(Exit::BadInput, e);
        let slos = if !args.slo.is_empty() {
            Slos::parse_all(&args.slo, SloSource::Flags).map_err(|e| bad(e.into()))?
        } else if let Some(given) = &args.campaign {
            let file = super::resolve_document(Some(given), true)?.unwrap_or_else(|| given.clone());
            let file = &file;
            let campaign = CampaignFile::load(file)
                .with_context(|| format!("--campaign {}", given.display()))
                .map_err(bad)?;
            campaign_slos(&campaign.slo, file).with_target(campaign.slo_target)
        } else {
            beside_the_data(data).map_err(bad)?
        };
        if !slos.is_empty() {
            eprintln!(
                "anvil {command}: SLOs {} (from {})",
                slos.text(),
                slos.source
            );
        }
        Ok(slos)
    }

    /// A campaign file's SLOs (parsed when it was read), with the file they came from.
    fn campaign_slos(slos: &crate::slo::SloSpec, file: &Path) -> Slos {
        Slos::of_spec(
            slos.clone(),
            SloSource::Campaign(file.display().to_string()),
        )
    }

    /// The SLOs a campaign file or journal in the `data` folders gives; none when neither
    /// does; an error when two give different ones.
    fn beside_the_data(data: &[PathBuf]) -> anyhow::Result<Slos> {
        let mut found: Vec<Slos> = Vec::new();
        for dir in data {
            let file = dir.join("campaign.json");
            let is_campaign = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v.get("schema").and_then(|s| s.as_str()).map(str::to_owned))
                .is_some_and(|s| s.starts_with(crate::campaign::CAMPAIGN_SCHEMA_FAMILY));
            if is_campaign {
                let campaign = CampaignFile::load(&file).with_context(|| {
                    format!(
                        "{} (the campaign file beside the data, read for its SLOs; give --slo or --campaign to use another)",
                        file.display()
                    )
                })?;
                found.push(campaign_slos(&campaign.slo, &file).with_target(campaign.slo_target));
                continue;
            }
            for journal in files_beside(dir, crate::campaign::journal::JOURNAL) {
                if let Some(slos) = recorded_slos(&journal)? {
                    found.push(slos);
                }
            }
        }
        found.retain(|s| !s.is_empty());
        let Some(first) = found.first().cloned() else {
            return Ok(Slos::none());
        };
        if let Some(other) = found.iter().find(|s| s.spec != first.spec) {
            anyhow::bail!(
                "the data's campaigns give different SLOs ({} from {}; {} from {}); choose with --slo",
                first.text(),
                first.source,
                other.text(),
                other.source
            );
        }
        Ok(first)
    }

    /// The capacity searches' results in `capacity.json` files in the `data` folders or one
    /// level beneath them (a campaign folder), in file order, read as `anvil validate` reads
    /// them; an unreadable or malformed file is named on standard error and left out.
    pub fn capacity_beside(
        command: &str,
        data: &[PathBuf],
    ) -> Vec<crate::report::input::CapacityFound> {
        let mut files: Vec<PathBuf> = data
            .iter()
            .flat_map(|dir| files_beside(dir, crate::artifact::capacity::CAPACITY_JSON))
            .collect();
        files.sort();
        files.dedup();
        let mut out = Vec::new();
        for file in files {
            let read = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|text| crate::artifact::capacity::Capacity::parse(&text));
            match read {
                Ok(doc) => out.extend(doc.searches.into_iter().map(|search| {
                    crate::report::input::CapacityFound {
                        search,
                        file: crate::location::shown(&file),
                    }
                })),
                Err(why) => eprintln!(
                    "anvil {command}: {}: {why}; its capacity searches are left out",
                    crate::location::shown(&file)
                ),
            }
        }
        out
    }

    /// The files called `name` in `dir` or one level beneath it (a data folder and the
    /// campaign folders in it), in path order.
    pub fn files_beside(dir: &Path, name: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::iter::once(dir.join(name))
            .chain(
                std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path().join(name)),
            )
            .filter(|p| p.is_file())
            .collect();
        out.sort();
        out
    }

    /// The SLOs the last `campaign_started` line of a journal recorded, if any.
    fn recorded_slos(journal: &Path) -> anyhow::Result<Option<Slos>> {
        let lines = crate::campaign::journal::Journal::read(journal).map_err(anyhow::Error::msg)?;
        let Some(started) = lines
            .iter()
            .rev()
            .find(|l| l.get("step").and_then(|s| s.as_str()) == Some("campaign_started"))
        else {
            return Ok(None);
        };
        let Some(recorded) = started.get("slo") else {
            return Ok(None);
        };
        let from = started
            .get("file")
            .and_then(|f| f.as_str())
            .map_or_else(|| journal.display().to_string(), str::to_owned);
        let spec = crate::slo::SloSpec::from_json(recorded)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{}: campaign_started.slo", journal.display()))?;
        Ok(Some(Slos::of_spec(spec, SloSource::Campaign(from))))
    }

    /// No artifact beneath `data`: `sql` says so and goes on with empty tables (a query of
    /// the views' shapes needs none); every command that computes figures, verdicts or a
    /// report refuses (exit 2) and writes nothing.
    pub fn say_if_empty(
        command: &str,
        data: &[PathBuf],
        session: &AnvilSession,
    ) -> Result<(), QueryError> {
        if !session.artifacts().is_empty() {
            return Ok(());
        }
        let dirs: Vec<String> = data.iter().map(|d| d.display().to_string()).collect();
        let dirs = dirs.join(", ");
        if command == "sql" {
            eprintln!(
                "anvil {command}: no artifact (a folder holding run.json) under {dirs}; the tables are empty"
            );
            return Ok(());
        }
        Err(QueryError::NoArtifact { dirs })
    }

    /// A campaign's two documents, read, with the manifest's path (for the commands a report
    /// shows) and how messages name each.
    pub struct Documents {
        pub manifest: WorkloadManifest,
        pub plan: RunPlan,
        pub manifest_path: PathBuf,
        /// `--manifest FILE` / `FILE (named by CAMPAIGN)`, and the same for the plan.
        pub names: [String; 2],
    }

    impl Documents {
        /// Bad input unless every artifact belongs to this manifest's and plan's campaign.
        pub fn one_campaign(
            &self,
            artifacts: &[crate::rules::Artifact],
        ) -> Result<(), crate::rules::CampaignMismatch> {
            let [m, p] = &self.names;
            crate::rules::one_campaign(&self.manifest, &self.plan, [m, p], artifacts)
        }
    }

    /// The manifest and the plan: those named by `--manifest` and `--plan`, else those the
    /// campaign file names (`--campaign FILE`, else a `campaign.json` in a data folder, else
    /// the file a campaign journal there was started from), and how messages name them.
    /// Without either, bad input naming the flags to give.
    pub fn load_documents(
        command: &str,
        manifest: Option<&Path>,
        plan: Option<&Path>,
        data: &[PathBuf],
        campaign: Option<&Path>,
    ) -> anyhow::Result<Documents> {
        let [manifest_local, plan_local, campaign] =
            super::resolve_documents(manifest, plan, campaign)?;
        let found = if manifest.is_some() && plan.is_some() {
            None
        } else {
            campaign_documents(data, campaign.as_deref())
        };
        // A document read from a copy is still named as given (its URL).
        let manifest_pair = manifest.zip(manifest_local.as_deref());
        let plan_pair = plan.zip(plan_local.as_deref());
        let pick =
            |given: Option<(&Path, &Path)>,
             flag: &str,
             which: fn(&(PathBuf, PathBuf)) -> &PathBuf| match (given, &found) {
                (Some((path, copy)), _) => Ok((
                    copy.to_owned(),
                    path.to_owned(),
                    format!("{flag} {}", path.display()),
                )),
                (None, Some((file, docs))) => {
                    let path = which(docs).clone();
                    let shown = crate::location::shown(&path);
                    let name = format!("{shown} (named by {})", crate::location::shown(file));
                    Ok((path, PathBuf::from(shown), name))
                }
                (None, None) => {
                    if let Some(missing) = data.iter().find(|d| !d.exists()) {
                        return Err(AppError::wrap(
                            Exit::BadInput,
                            anyhow::anyhow!("{}: does not exist", missing.display()),
                        ));
                    }
                    let dirs: Vec<String> = data.iter().map(|d| d.display().to_string()).collect();
                    Err(AppError::wrap(
                        Exit::BadInput,
                        anyhow::anyhow!(
                            "anvil {command} needs the campaign's workload manifest and run plan: \
                             give --manifest FILE and --plan FILE (no campaign file, campaign.json \
                             or campaign journal, in {} names them)",
                            dirs.join(", ")
                        ),
                    ))
                }
            };
        let (manifest, manifest_shown, m_name) = pick(manifest_pair, "--manifest", |d| &d.0)?;
        let (plan, _, p_name) = pick(plan_pair, "--plan", |d| &d.1)?;
        Ok(Documents {
            manifest: WorkloadManifest::load(&manifest).with_context(|| m_name.clone())?,
            plan: RunPlan::load(&plan).with_context(|| p_name.clone())?,
            manifest_path: manifest_shown,
            names: [m_name, p_name],
        })
    }

    /// The campaign file that names the data's documents, and their paths: `campaign` when
    /// given, else the first `campaign.json` of a campaign schema in a data folder or a folder
    /// above it, else the campaign file a journal in (or one level beneath) one of those was
    /// started from.
    pub fn campaign_documents(
        data: &[PathBuf],
        campaign: Option<&Path>,
    ) -> Option<(PathBuf, (PathBuf, PathBuf))> {
        let documents = |file: &Path| {
            CampaignFile::load(file)
                .ok()
                .map(|c| (file.to_owned(), c.documents(file)))
        };
        if let Some(file) = campaign {
            return documents(file);
        }
        // The data folders and the folders above them (artifact folders given one by one
        // sit inside their campaign's folder).
        let folders: Vec<&Path> = data.iter().flat_map(|d| d.ancestors()).collect();
        for dir in &folders {
            if let Some(found) = documents(&dir.join("campaign.json")) {
                return Some(found);
            }
        }
        for dir in data
            .iter()
            .map(PathBuf::as_path)
            .chain(folders.iter().copied())
        {
            for journal in files_beside(dir, crate::campaign::journal::JOURNAL) {
                let Ok(lines) = crate::campaign::journal::Journal::read(&journal) else {
                    continue;
                };
                let started = lines.iter().rev().find_map(|l| {
                    (l.get("step").and_then(|s| s.as_str()) == Some("campaign_started"))
                        .then(|| l.get("file").and_then(|f| f.as_str()).map(PathBuf::from))
                        .flatten()
                });
                if let Some(found) = started.as_deref().and_then(documents) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// `value` as pretty JSON with a final newline.
    pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<String> {
        let mut text = serde_json::to_string_pretty(value).context("encoding JSON")?;
        text.push('\n');
        Ok(text)
    }
}
