//! `gpuledger serve`, `demo` and `generate`.

use anyhow::Context;

use crate::auth::{Role, User, password};
use crate::cli::{AuthArgs, DemoArgs, GenerateArgs, ServeArgs, last_complete_month};
use crate::ingest::CurIngestOptions;
use crate::store::Store;
use crate::synth::{self, GenerateOptions};
use crate::web;

/// Serves the dashboard until Ctrl-C or SIGTERM.
pub(super) async fn serve(store: Box<dyn Store>, args: ServeArgs) -> anyhow::Result<()> {
    let auth = auth_config(&args.auth, args.listen)?;
    let mut state = web::AppState::new(store, auth);
    if !args.aws_recommendation.is_empty() {
        state.aws_recommendation =
            Some(std::sync::Arc::new(super::report::saved_recommendations(&args.aws_recommendation)?));
    }
    web::serve(state, args.listen).await
}

/// The sign-in settings the flags ask for, refused when they would be unsafe: no sign-in on
/// an address other than loopback, a proxy mode that would believe anyone.
fn auth_config(args: &AuthArgs, listen: std::net::SocketAddr) -> anyhow::Result<web::AuthConfig> {
    let mut config = web::AuthConfig::local();
    config.secure_cookies = args.secure_cookies;
    config.metrics_token = args.metrics_token.clone().filter(|t| !t.is_empty());
    match args.auth.as_str() {
        "none" => {
            if !listen.ip().is_loopback() {
                anyhow::bail!(
                    "--auth none serves every client's numbers to anyone who can reach {listen}: \
                     only a loopback address (127.0.0.1) may run without sign-in"
                );
            }
            eprintln!(
                "warning: sign-in is off (--auth none): everyone who can reach {listen} is an administrator"
            );
            config.mode = web::AuthMode::Off;
        }
        "proxy" => {
            let trusted = args
                .trusted_proxies
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(|a| a.parse().with_context(|| format!("--trusted-proxies: {a:?} is not an IP address")))
                .collect::<anyhow::Result<Vec<std::net::IpAddr>>>()?;
            if trusted.is_empty() {
                anyhow::bail!(
                    "--auth proxy needs --trusted-proxies: the addresses whose user header is believed"
                );
            }
            let header =
                axum::http::HeaderName::from_bytes(args.proxy_user_header.to_ascii_lowercase().as_bytes())
                    .with_context(|| {
                        format!("--proxy-user-header {:?} is not a header name", args.proxy_user_header)
                    })?;
            config.mode = web::AuthMode::Proxy { header, trusted };
        }
        _ => {}
    }
    Ok(config)
}

/// The demo's accounts, made on its first run with random passwords, kept in
/// `users.txt` in the demo folder (readable by its owner only) and printed at every start.
async fn demo_users(store: &dyn Store, data: &std::path::Path) -> anyhow::Result<()> {
    let file = data.join("users.txt");
    if store.users().await?.is_empty() {
        let accounts = [
            ("admin", Role::Admin, vec![]),
            ("finance", Role::Finance, vec![]),
            ("manager", Role::Manager, vec!["acme".to_string(), "globex".to_string()]),
            ("acme", Role::Client, vec!["acme".to_string()]),
        ];
        let mut lines = String::from("# gpuledger demo accounts: user password role clients\n");
        for (name, role, clients) in accounts {
            let secret = password::random();
            let user = User::new(name, role, clients.clone(), password::hash(&secret)?);
            store.create_user(&user).await?;
            lines.push_str(&format!("{name} {secret} {role} {}\n", clients.join(",")));
        }
        std::fs::write(&file, &lines).with_context(|| format!("writing {}", file.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            eprintln!("Sign in with one of the demo accounts (also in {}):", file.display());
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                eprintln!("  {line}");
            }
        }
        Err(_) => eprintln!(
            "The demo's accounts exist; reset one with `gpuledger users reset-password NAME --password-stdin`."
        ),
    }
    Ok(())
}

/// On the demo's first run: a seller, acme's billing details, and the oldest month invoiced
/// for every client (later months stay drafts, to issue from the Invoices page).
async fn demo_invoices(store: &dyn Store) -> anyhow::Result<()> {
    use crate::invoice::{BillingDetails, ledger};
    if !store.documents(None, None).await?.is_empty() {
        return Ok(());
    }
    let Some(oldest) = store.rollup_periods().await?.pop() else { return Ok(()) };
    let seller = crate::invoice::Seller {
        name: "Demo GPU Agency".into(),
        address: "1 Example Street\nSeattle, WA 98101".into(),
        email: "billing@agency.example".into(),
        ..crate::invoice::Seller::default()
    };
    store.set_seller(&seller).await?;
    let acme = BillingDetails {
        legal_name: "Acme Corporation".into(),
        address: "100 Desert Road\nPhoenix, AZ 85001".into(),
        po_number: "PO-2026-118".into(),
        ..BillingDetails::default()
    };
    store.set_billing_details("acme", &acme, chrono::Utc::now().timestamp()).await?;
    let Some(rollups) = store.rollups(&oldest.period).await? else { return Ok(()) };
    let period = oldest.period.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    for client in rollups.clients.iter().map(|c| &c.client).filter(|c| crate::invoice::invoiceable(c)) {
        ledger::issue(store, client, period, "demo", false).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}

/// The demo export's months, oldest first (one `None`, every month at once, when they
/// cannot be listed).
fn demo_months(export: &std::path::Path) -> Vec<Option<crate::period::Period>> {
    let mut months: Vec<crate::period::Period> = std::fs::read_dir(export.join("metadata"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("BILLING_PERIOD=")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    months.sort();
    if months.is_empty() { vec![None] } else { months.into_iter().map(Some).collect() }
}

/// The exchange rate the demo's euro bills are converted at, from its first month.
const DEMO_EUR_USD: &str = "1.0842";

/// The demo's overflow clouds: a EUR→USD rate when there is none, and their FOCUS bills
/// (Azure's export runs, Google's files, Oracle's reports) when they were generated.
async fn demo_other_clouds(
    store: &dyn Store,
    data: &std::path::Path,
    first: Option<crate::period::Period>,
) -> anyhow::Result<()> {
    let folders: Vec<std::path::PathBuf> =
        ["azure", "gcp", "oci"].iter().map(|f| data.join(f)).filter(|f| f.is_dir()).collect();
    if folders.is_empty() {
        return Ok(());
    }
    if let Some(first) = first
        && !store.fx_rates().await?.iter().any(|r| r.from_currency == "EUR" && r.to_currency == "USD")
    {
        let rate = crate::domain::fx::FxRate::new("EUR", "USD", DEMO_EUR_USD, first, "demo")?;
        store.set_fx_rates(&[rate], "demo").await?;
        eprintln!("demo: 1 EUR = {DEMO_EUR_USD} USD from {first} (see `gpuledger fx list`)");
    }
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    for folder in folders {
        let options = crate::ingest::focus::FocusIngestOptions {
            source: folder.display().to_string(),
            ..Default::default()
        };
        let bills = crate::ingest::focus::ingest_focus(store, &options, &progress).await?;
        let ingested = bills.iter().filter(|b| b.status == "ingested").count();
        if ingested > 0 {
            eprintln!("demo: {ingested} FOCUS bills from {}", folder.display());
        }
    }
    Ok(())
}

/// On the demo's first run: Cost Explorer's answer for the generated world (history months
/// before the CUR, and every CUR day for the cross-check), as a saved file.
async fn demo_cost_explorer(store: &dyn Store, file: &std::path::Path) -> anyhow::Result<()> {
    if !file.exists() || !store.ce_days(0, i64::MAX).await?.is_empty() {
        return Ok(());
    }
    let options = crate::ingest::cost_explorer::CeIngestOptions {
        from: chrono::NaiveDate::MIN,
        to: chrono::NaiveDate::MIN,
        file: Some(file.to_path_buf()),
        force: false,
        today: chrono::Utc::now().date_naive(),
        ce: Default::default(),
    };
    let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let result = crate::ingest::cost_explorer::ingest_cost_explorer(store, &options, &progress).await?;
    eprintln!("demo: Cost Explorer's daily cost from {} to {} (saved answer)", result.from, result.to);
    Ok(())
}

/// Generates the demo data on the first run, ingests what is new (nothing on a later run),
/// and serves.
pub(super) async fn demo(store: Box<dyn Store>, args: DemoArgs) -> anyhow::Result<()> {
    if !args.data.join("truth.json").exists() {
        // The agency's world: AWS (the CUR, and its FOCUS export) and its overflow clouds.
        let options = GenerateOptions {
            focus: true,
            providers: synth::clouds::Provider::ALL.to_vec(),
            ..GenerateOptions::demo(args.data.clone(), last_complete_month())
        };
        let summary = generate_blocking(options).await?;
        eprintln!(
            "generated {} CUR rows for {} in {}",
            summary.cur_rows,
            summary.periods.join(", "),
            args.data.display()
        );
    }
    let history = store.settings().await?;
    if !history.versions.iter().any(|v| v.kind == crate::domain::settings::SettingKind::Labels) {
        // The generated world labels every pod with its client, and the demo's administrator
        // trusts those labels; `gpuledger clients labels` narrows it.
        let version = history
            .labels_version(crate::domain::settings::EffectiveFrom::BEGINNING, &["*".to_string()])
            .map_err(anyhow::Error::msg)?;
        store.save_settings(&[version]).await?;
        eprintln!(
            "demo: pods' user_client labels name their clients in every cluster (see `gpuledger clients labels`)"
        );
    }
    let terms = synth::demo_terms(&history).map_err(anyhow::Error::msg)?;
    if !terms.is_empty() {
        store.save_settings(&terms).await?;
        eprintln!("demo: the agency's markups on its clients (see `gpuledger clients list`)");
    }
    // Metrics first, then the bill month by month, oldest first, as months arrive in real
    // life: each month is computed once, and the cost alerts follow the story (firing in the
    // wasteful months, resolving when the fixes land).
    super::ingest::ingest_demo_metrics(store.as_ref(), &args.data.join("metrics")).await?;
    let export = args.data.join("cur").join(synth::DEFAULT_EXPORT_NAME);
    // The other clouds' bills before the CUR's months: each month is then computed once, with
    // every bill in it.
    demo_other_clouds(store.as_ref(), &args.data, demo_months(&export).first().copied().flatten()).await?;
    for period in demo_months(&export) {
        let options =
            CurIngestOptions { source: export.display().to_string(), period, ..CurIngestOptions::default() };
        super::ingest::run_cur_ingest(store.as_ref(), &options).await?;
    }
    demo_cost_explorer(store.as_ref(), &args.data.join("cost-explorer.json")).await?;
    demo_invoices(store.as_ref()).await?;
    let auth = auth_config(&args.auth, args.listen)?;
    if matches!(auth.mode, web::AuthMode::Local) {
        demo_users(store.as_ref(), &args.data).await?;
    }
    let mut state = web::AppState::new(store, auth);
    // The generator's saved answers of Cost Explorer's Savings Plan (Compute, EC2 Instance)
    // and reservation recommendations.
    let saved: Vec<std::path::PathBuf> = [
        "savings-plans-recommendation.json",
        "instance-savings-plans-recommendation.json",
        "reservation-recommendation.json",
    ]
    .iter()
    .map(|name| args.data.join(name))
    .filter(|path| path.exists())
    .collect();
    if !saved.is_empty() {
        state.aws_recommendation = Some(std::sync::Arc::new(super::report::saved_recommendations(&saved)?));
    }
    web::serve(state, args.listen).await
}

/// Writes a synthetic export; the summary is for scripts (JSON on stdout).
pub(super) async fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    let options = GenerateOptions {
        out: args.out,
        seed: args.seed,
        months: args.months,
        end: args.end.unwrap_or_else(last_complete_month),
        scale: args.scale,
        format: args.format,
        bucket: args.bucket,
        prefix: args.prefix,
        export_name: args.export_name,
        metrics: !args.no_metrics,
        kube_state_metrics: args.kube_state_metrics,
        cloud_kube_from: None,
        fixes_from: args.fixes_from,
        history_months: args.history_months,
        through_day: args.through_day,
        fleet_percent: args.fleet_percent,
        // Other clouds come with AWS's FOCUS export of its bill, so every bill has a FOCUS twin.
        focus: args.focus || args.providers.iter().any(|p| *p != synth::clouds::Provider::Aws),
        providers: args.providers,
        without_cur_split: args.without_cur_split,
        sub_account: args.sub_account,
        azure_machine_column: args.azure_machine_column,
        growth: args.growth,
        hold_back: args.hold_back,
    };
    let summary = generate_blocking(options).await?;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

/// Generation is CPU-bound: run it off the async runtime, with progress on stderr.
async fn generate_blocking(options: GenerateOptions) -> anyhow::Result<synth::GenerateSummary> {
    let out = options.out.clone();
    tokio::task::spawn_blocking(move || {
        let progress = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
        synth::generate(&options, &progress)
    })
    .await?
    .with_context(|| format!("generating into {}", out.display()))
}
