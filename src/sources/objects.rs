//! Where an export's files live: a local folder or an S3 prefix, behind one small trait so
//! discovery and reading are written once. Keys are relative to the export root
//! (`metadata/BILLING_PERIOD=2026-10/x-Manifest.json`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use tokio::io::AsyncWriteExt;

/// What went wrong reading an object, with the object named.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("{location}: {message}")]
    Failed { location: String, message: String },
}

pub(crate) fn failed(location: impl Into<String>, message: impl std::fmt::Display) -> ObjectError {
    ObjectError::Failed { location: location.into(), message: message.to_string() }
}

/// An object read whole (manifests are small).
pub struct Object {
    pub bytes: Vec<u8>,
    /// S3 ETag, when the store has one.
    pub etag: Option<String>,
}

/// A read-only store of export files.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// How a person names this location (a folder, or `s3://bucket/prefix`).
    fn describe(&self) -> String;

    /// Full name of a key, for messages.
    fn locate(&self, key: &str) -> String;

    /// The names of the immediate sub-folders of `prefix` (which ends with `/`).
    async fn folders(&self, prefix: &str) -> Result<Vec<String>, ObjectError>;

    /// The names of the files directly under `prefix`.
    async fn files(&self, prefix: &str) -> Result<Vec<String>, ObjectError>;

    /// Reads a small object whole; `Ok(None)` when it does not exist.
    async fn get(&self, key: &str) -> Result<Option<Object>, ObjectError>;

    /// A local path holding the object: the file itself for a folder, a download into
    /// `scratch` for S3 (streamed to disk, never held whole in memory).
    async fn local_copy(&self, key: &str, scratch: &Path) -> Result<PathBuf, ObjectError>;

    /// Turns a manifest's `dataFiles` URI into a key of this store; `None` when the URI
    /// lies outside the export root (another bucket or prefix, or a `..` segment).
    fn key_of_uri(&self, uri: &str) -> Option<String>;
}

/// A key stays under the export root: relative, no `..` or `.` segment, no empty name.
fn inside_root(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('/')
        && key.split('/').all(|segment| !matches!(segment, "" | "." | ".."))
}

/// An export root on the local disk.
pub struct LocalFolder {
    pub root: PathBuf,
}

#[async_trait]
impl ObjectStore for LocalFolder {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn locate(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }

    async fn folders(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        self.entries(prefix, true)
    }

    async fn files(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        self.entries(prefix, false)
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, ObjectError> {
        let path = self.root.join(key);
        match std::fs::read(&path) {
            Ok(bytes) => {
                // A manifest may not lead out of the export either.
                self.refuse_a_link_out(&path)?;
                Ok(Some(Object { bytes, etag: None }))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(failed(path.display().to_string(), error)),
        }
    }

    async fn local_copy(&self, key: &str, _scratch: &Path) -> Result<PathBuf, ObjectError> {
        let path = self.root.join(key);
        if !path.is_file() {
            return Err(failed(
                path.display().to_string(),
                "listed in the manifest but the file does not exist",
            ));
        }
        self.refuse_a_link_out(&path)?;
        Ok(path)
    }

    fn key_of_uri(&self, uri: &str) -> Option<String> {
        // The local copy of an export keeps the layout under the export root, so the key is
        // what follows the last `/data/` of the URI.
        let key = match uri.rfind("/data/") {
            Some(index) => &uri[index + 1..],
            None => uri.rsplit('/').next().unwrap_or(uri),
        };
        inside_root(key).then(|| key.to_string())
    }
}

impl LocalFolder {
    /// A symbolic link may not lead out of the export: a file's real path must lie under the
    /// root's.
    fn refuse_a_link_out(&self, path: &Path) -> Result<(), ObjectError> {
        let resolved = std::fs::canonicalize(path).map_err(|e| failed(path.display().to_string(), e))?;
        let root =
            std::fs::canonicalize(&self.root).map_err(|e| failed(self.root.display().to_string(), e))?;
        if !resolved.starts_with(&root) {
            return Err(failed(
                path.display().to_string(),
                format!("is a link to {}, outside the export root {}", resolved.display(), root.display()),
            ));
        }
        Ok(())
    }

    fn entries(&self, prefix: &str, folders: bool) -> Result<Vec<String>, ObjectError> {
        let dir = self.root.join(prefix);
        let read = match std::fs::read_dir(&dir) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(failed(dir.display().to_string(), error)),
        };
        let mut names = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| failed(dir.display().to_string(), e))?;
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if is_dir == folders {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }
}

/// An export root in S3: `s3://bucket/prefix/export-name`.
pub struct S3Store {
    client: aws_sdk_s3::Client,
    timeout: Duration,
    bucket: String,
    /// Key prefix of the export root, ending with `/` (or empty).
    root: String,
}

/// How to reach S3: the default credential chain and region, optionally another endpoint.
#[derive(Debug, Clone)]
pub struct S3Options {
    /// An S3-compatible endpoint (moto, MinIO); switches to path-style addressing.
    pub endpoint_url: Option<String>,
    /// Longest wait for a connection, a response, or the next bytes of a download.
    pub timeout: Duration,
}

impl Default for S3Options {
    fn default() -> S3Options {
        S3Options { endpoint_url: None, timeout: Duration::from_secs(30) }
    }
}

impl S3Store {
    /// Connects to `s3://bucket/prefix/export-name` with retries on throttling and 5xx.
    pub async fn connect(uri: &str, options: &S3Options) -> Result<S3Store, ObjectError> {
        let rest = uri.strip_prefix("s3://").ok_or_else(|| failed(uri, "not an s3:// URI"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(failed(uri, "the URI names no bucket"));
        }
        let prefix = prefix.trim_end_matches('/');
        let shared = super::aws_config(5, Duration::from_millis(200), options.timeout).await;
        let mut builder = aws_sdk_s3::config::Builder::from(&shared);
        if let Some(endpoint) = &options.endpoint_url {
            builder = builder.endpoint_url(endpoint).force_path_style(true);
        }
        if shared.region().is_none() {
            builder = builder.region(aws_sdk_s3::config::Region::new("us-east-1"));
        }
        Ok(S3Store {
            client: aws_sdk_s3::Client::from_conf(builder.build()),
            timeout: options.timeout,
            bucket: bucket.to_string(),
            root: if prefix.is_empty() { String::new() } else { format!("{prefix}/") },
        })
    }

    /// Writes `bytes` as `key` (an archive's file; the CUR is only ever read).
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), ObjectError> {
        let full = format!("{}{key}", self.root);
        let request = self.client.put_object().bucket(&self.bucket).key(&full).body(ByteStream::from(bytes));
        request.send().await.map_err(|e| failed(self.locate(key), describe_sdk_error(&e)))?;
        Ok(())
    }

    /// Deletes `key` (an unfinished archive's manifest).
    pub async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        let full = format!("{}{key}", self.root);
        let request = self.client.delete_object().bucket(&self.bucket).key(&full);
        request.send().await.map_err(|e| failed(self.locate(key), describe_sdk_error(&e)))?;
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>), ObjectError> {
        let full = format!("{}{prefix}", self.root);
        let mut folders = Vec::new();
        let mut files = Vec::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&full)
            .delimiter("/")
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| failed(self.locate(prefix), describe_sdk_error(&e)))?;
            for common in page.common_prefixes() {
                if let Some(name) = common.prefix().and_then(|p| p.strip_prefix(&full)) {
                    folders.push(name.trim_end_matches('/').to_string());
                }
            }
            for object in page.contents() {
                if let Some(name) = object.key().and_then(|k| k.strip_prefix(&full)) {
                    files.push(name.to_string());
                }
            }
        }
        folders.sort();
        files.sort();
        Ok((folders, files))
    }
}

/// An error with its causes (the SDK's service code and message, not just "service error").
pub(crate) fn describe_sdk_error<E: std::error::Error>(error: &E) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

#[async_trait]
impl ObjectStore for S3Store {
    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.root.trim_end_matches('/'))
    }

    fn locate(&self, key: &str) -> String {
        format!("s3://{}/{}{key}", self.bucket, self.root)
    }

    async fn folders(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        Ok(self.list(prefix).await?.0)
    }

    async fn files(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        Ok(self.list(prefix).await?.1)
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, ObjectError> {
        let full = format!("{}{key}", self.root);
        let response = match self.client.get_object().bucket(&self.bucket).key(&full).send().await {
            Ok(response) => response,
            Err(error) => {
                if error.as_service_error().is_some_and(|e| e.is_no_such_key()) {
                    return Ok(None);
                }
                return Err(failed(self.locate(key), describe_sdk_error(&error)));
            }
        };
        let etag = response.e_tag().map(str::to_string);
        let bytes =
            response.body.collect().await.map_err(|e| failed(self.locate(key), e))?.into_bytes().to_vec();
        Ok(Some(Object { bytes, etag }))
    }

    async fn local_copy(&self, key: &str, scratch: &Path) -> Result<PathBuf, ObjectError> {
        let full = format!("{}{key}", self.root);
        let response = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&full)
            .send()
            .await
            .map_err(|e| failed(self.locate(key), describe_sdk_error(&e)))?;
        // The whole key names the download: two data files may share a base name in
        // different folders.
        let path = scratch.join(key.replace('/', "__"));
        let mut file =
            tokio::fs::File::create(&path).await.map_err(|e| failed(path.display().to_string(), e))?;
        let mut body: ByteStream = response.body;
        // Stream to disk chunk by chunk: a large export is never held whole in memory. A body
        // that stops mid-way is given up on after the timeout rather than waited on forever.
        loop {
            let next = tokio::time::timeout(self.timeout, body.try_next()).await.map_err(|_| {
                failed(
                    self.locate(key),
                    format!(
                        "the endpoint stopped sending data for {} s mid-download",
                        self.timeout.as_secs()
                    ),
                )
            })?;
            let Some(chunk) = next.map_err(|e| failed(self.locate(key), e))? else { break };
            file.write_all(&chunk).await.map_err(|e| failed(path.display().to_string(), e))?;
        }
        file.flush().await.map_err(|e| failed(path.display().to_string(), e))?;
        Ok(path)
    }

    fn key_of_uri(&self, uri: &str) -> Option<String> {
        let without_scheme = uri.strip_prefix("s3://").unwrap_or(uri);
        let (bucket, key) = without_scheme.split_once('/')?;
        let key = key.strip_prefix(&self.root).filter(|_| bucket == self.bucket)?;
        inside_root(key).then(|| key.to_string())
    }
}
