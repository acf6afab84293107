//! `gpuledger users`: accounts of the dashboard.

use std::io::BufRead;

use anyhow::{Context, bail};

use crate::auth::{AuditEntry, User, password};
use crate::cli::{UserAddArgs, UsersCommand};
use crate::domain::users::{check_an_admin_remains, check_clients, check_clients_exist, client_list};
use crate::report::OutputFormat;
use crate::store::Store;

fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    if !from_stdin {
        bail!(
            "give the password on stdin with --password-stdin (never as an argument: it would be in the shell history)"
        );
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("reading the password from stdin")?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}

pub(super) async fn audit(store: &dyn Store, action: &str, detail: String) -> anyhow::Result<()> {
    let operator = std::env::var("USER").unwrap_or_default();
    let entry = AuditEntry::new(&format!("cli:{operator}"), "", action, &detail);
    Ok(store.audit(&entry).await?)
}

async fn check_known_clients(store: &dyn Store, user: &User) -> anyhow::Result<()> {
    let known = crate::store::known_clients(store).await?;
    check_clients_exist(user, &known).map_err(anyhow::Error::msg)
}

async fn existing(store: &dyn Store, name: &str) -> anyhow::Result<User> {
    store.user(name).await?.with_context(|| format!("no user named {name:?} (see `gpuledger users list`)"))
}

pub(super) async fn run(store: &dyn Store, command: UsersCommand) -> anyhow::Result<()> {
    let now = chrono::Utc::now().timestamp();
    match command {
        UsersCommand::Add(UserAddArgs { name, role, clients, password_stdin }) => {
            let password_hash =
                if password_stdin { password::hash(&read_password(true)?)? } else { String::new() };
            let user = User::new(&name, role, client_list(&clients), password_hash);
            check_clients(&user).map_err(anyhow::Error::msg)?;
            check_known_clients(store, &user).await?;
            store.create_user(&user).await?;
            audit(store, "user_added", format!("{user} clients {:?}", user.clients)).await?;
            eprintln!("added {user}");
        }
        UsersCommand::List { format } => {
            let users = store.users().await?;
            match format {
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&users)?),
                OutputFormat::Csv => {
                    println!("name,role,clients,disabled");
                    for u in &users {
                        println!("{},{},{},{}", u.name, u.role, u.clients.join(";"), u.disabled);
                    }
                }
                OutputFormat::Table => {
                    for u in &users {
                        let state = if u.disabled { "disabled" } else { "active" };
                        println!(
                            "{:<24} {:<8} {:<9} {}",
                            u.name,
                            u.role.as_str(),
                            state,
                            u.clients.join(", ")
                        );
                    }
                }
            }
        }
        UsersCommand::SetRole { name, role, clients } => {
            let mut user = existing(store, &name).await?;
            user.role = role;
            user.clients = client_list(&clients);
            user.updated_at = now;
            check_clients(&user).map_err(anyhow::Error::msg)?;
            check_known_clients(store, &user).await?;
            check_an_admin_remains(&store.users().await?, &user).map_err(anyhow::Error::msg)?;
            store.update_user(&user, true).await?;
            audit(store, "user_changed", format!("role of {user} clients {:?}", user.clients)).await?;
            eprintln!(
                "{user} now sees {}",
                if role.is_scoped() { user.clients.join(", ") } else { "every client".into() }
            );
        }
        UsersCommand::Disable { name } => {
            let mut user = existing(store, &name).await?;
            user.disabled = true;
            user.updated_at = now;
            check_an_admin_remains(&store.users().await?, &user).map_err(anyhow::Error::msg)?;
            store.update_user(&user, true).await?;
            audit(store, "user_changed", format!("disabled {user}")).await?;
            eprintln!("disabled {user}; its sessions have ended");
        }
        UsersCommand::Enable { name } => {
            let mut user = existing(store, &name).await?;
            user.disabled = false;
            user.updated_at = now;
            store.update_user(&user, false).await?;
            audit(store, "user_changed", format!("enabled {user}")).await?;
            eprintln!("enabled {user}");
        }
        UsersCommand::SignInCode { name, minutes } => {
            let user = existing(store, &name).await?;
            let code = crate::auth::random_token();
            store.add_sign_in_code(&user.name, &crate::auth::token_hash(&code), now + minutes * 60).await?;
            audit(store, "sign_in_code", format!("for {user}, valid {minutes} minutes")).await?;
            eprintln!(
                "a one-time sign-in code for {user}, valid {minutes} minutes (enter it with the password):"
            );
            println!("{code}");
        }
        UsersCommand::ResetPassword { name, password_stdin } => {
            let mut user = existing(store, &name).await?;
            user.password_hash = password::hash(&read_password(password_stdin)?)?;
            user.updated_at = now;
            store.update_user(&user, true).await?;
            audit(store, "password_changed", format!("reset for {user}")).await?;
            eprintln!("new password set for {user}; its sessions have ended");
        }
    }
    Ok(())
}
