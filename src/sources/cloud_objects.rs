//! FOCUS exports in Azure Blob Storage (`az://CONTAINER/PREFIX`) and Google Cloud Storage
//! (`gs://BUCKET/PREFIX`), read through the Apache Arrow project's `object_store` client
//! (the one polars builds on) behind the same [`ObjectStore`] trait as a folder or S3.
//!
//! Credentials come from the environment as each provider's tools name them: Azure's
//! `AZURE_STORAGE_ACCOUNT_NAME` with `AZURE_STORAGE_ACCOUNT_KEY` (or a SAS token, or a service
//! principal's `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`); Google's
//! `GOOGLE_APPLICATION_CREDENTIALS` (a service account's key file) or the VM's metadata
//! server. `--endpoint-url` names another endpoint (Azurite, the emulator:
//! `http://127.0.0.1:10000/devstoreaccount1`). No key ever reaches a message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore as _, ObjectStoreExt as _};
use tokio::io::AsyncWriteExt;

use super::objects::{Object, ObjectError, ObjectStore, failed};

/// Which cloud's storage a source names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    AzureBlob,
    GoogleStorage,
}

impl Cloud {
    /// The cloud a source URL names, if it names one (`az://`, `abfs://`, `gs://`).
    pub fn of(source: &str) -> Option<Cloud> {
        if source.starts_with("az://") || source.starts_with("abfs://") || source.starts_with("azure://") {
            Some(Cloud::AzureBlob)
        } else if source.starts_with("gs://") {
            Some(Cloud::GoogleStorage)
        } else {
            None
        }
    }

    fn scheme(self) -> &'static str {
        match self {
            Cloud::AzureBlob => "az",
            Cloud::GoogleStorage => "gs",
        }
    }
}

/// A container or bucket prefix in Azure Blob Storage or Google Cloud Storage.
pub struct CloudFolder {
    cloud: Cloud,
    container: String,
    /// The prefix under the container, empty or ending with `/`.
    root: String,
    store: Arc<dyn object_store::ObjectStore>,
}

impl CloudFolder {
    /// Connects to `source` (`az://container/prefix`, `gs://bucket/prefix`) with the
    /// environment's credentials, at `endpoint` when one is given.
    pub fn connect(source: &str, endpoint: Option<&str>) -> Result<CloudFolder, ObjectError> {
        let cloud = Cloud::of(source).ok_or_else(|| failed(source, "not an az:// or gs:// location"))?;
        let rest = source.split_once("://").map_or("", |(_, rest)| rest);
        let (container, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // `abfs://container@account.dfs.core.windows.net/prefix` names the account too.
        let (container, account) = match container.split_once('@') {
            Some((container, host)) => (container, host.split('.').next()),
            None => (container, None),
        };
        if container.is_empty() {
            return Err(failed(source, "no container or bucket named"));
        }
        let prefix = prefix.trim_matches('/');
        let root = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        let refuse = |e: object_store::Error| failed(source, describe(&e));
        let store: Arc<dyn object_store::ObjectStore> = match cloud {
            Cloud::AzureBlob => {
                let mut builder =
                    object_store::azure::MicrosoftAzureBuilder::from_env().with_container_name(container);
                if let Some(account) = account {
                    builder = builder.with_account(account);
                }
                if let Some(endpoint) = endpoint {
                    builder = builder
                        .with_endpoint(endpoint.to_string())
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                Arc::new(builder.build().map_err(refuse)?)
            }
            Cloud::GoogleStorage => {
                let mut builder =
                    object_store::gcp::GoogleCloudStorageBuilder::from_env().with_bucket_name(container);
                if let Some(endpoint) = endpoint {
                    builder = builder.with_url(endpoint);
                }
                Arc::new(builder.build().map_err(refuse)?)
            }
        };
        Ok(CloudFolder { cloud, container: container.to_string(), root, store })
    }

    fn full(&self, key: &str) -> StorePath {
        StorePath::from(format!("{}{key}", self.root))
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>), ObjectError> {
        let full = format!("{}{prefix}", self.root);
        let path = StorePath::from(full.trim_end_matches('/'));
        let listed = self
            .store
            .list_with_delimiter((!full.is_empty()).then_some(&path))
            .await
            .map_err(|e| failed(self.locate(prefix), describe(&e)))?;
        let name = |location: &StorePath| location.filename().unwrap_or_default().to_string();
        let mut folders: Vec<String> = listed.common_prefixes.iter().map(name).collect();
        let mut files: Vec<String> = listed.objects.iter().map(|o| name(&o.location)).collect();
        folders.sort();
        files.sort();
        Ok((folders, files))
    }
}

/// The client's error with its causes, never its credentials (it names none).
fn describe(error: &object_store::Error) -> String {
    super::objects::describe_sdk_error(error)
}

#[async_trait]
impl ObjectStore for CloudFolder {
    fn describe(&self) -> String {
        format!("{}://{}/{}", self.cloud.scheme(), self.container, self.root.trim_end_matches('/'))
    }

    fn locate(&self, key: &str) -> String {
        format!("{}://{}/{}{key}", self.cloud.scheme(), self.container, self.root)
    }

    async fn folders(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        Ok(self.list(prefix).await?.0)
    }

    async fn files(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        Ok(self.list(prefix).await?.1)
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, ObjectError> {
        match self.store.get(&self.full(key)).await {
            Ok(result) => {
                let etag = result.meta.e_tag.clone();
                let bytes = result.bytes().await.map_err(|e| failed(self.locate(key), describe(&e)))?;
                Ok(Some(Object { bytes: bytes.to_vec(), etag }))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(failed(self.locate(key), describe(&error))),
        }
    }

    async fn local_copy(&self, key: &str, scratch: &Path) -> Result<PathBuf, ObjectError> {
        let result =
            self.store.get(&self.full(key)).await.map_err(|e| failed(self.locate(key), describe(&e)))?;
        let name = key.replace('/', "_");
        let path = scratch.join(name);
        let mut file =
            tokio::fs::File::create(&path).await.map_err(|e| failed(path.display().to_string(), e))?;
        let mut stream = result.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| failed(self.locate(key), describe(&e)))?;
            file.write_all(&chunk).await.map_err(|e| failed(path.display().to_string(), e))?;
        }
        file.flush().await.map_err(|e| failed(path.display().to_string(), e))?;
        Ok(path)
    }

    fn key_of_uri(&self, uri: &str) -> Option<String> {
        let own = format!("{}://{}/{}", self.cloud.scheme(), self.container, self.root);
        let key = uri.strip_prefix(&own)?;
        (!key.is_empty() && key.split('/').all(|s| !matches!(s, "" | "." | ".."))).then(|| key.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_names_its_cloud_container_and_prefix() {
        assert_eq!(Cloud::of("az://exports/focus"), Some(Cloud::AzureBlob));
        assert_eq!(Cloud::of("gs://billing/focus"), Some(Cloud::GoogleStorage));
        assert_eq!(Cloud::of("s3://bucket/cur"), None);
        // `abfs://` names the account beside the container.
        let folder = CloudFolder::connect(
            "abfs://exports@devstoreaccount1.dfs.core.windows.net/focus/daily/",
            Some("http://127.0.0.1:10000/devstoreaccount1"),
        )
        .unwrap();
        assert_eq!(folder.describe(), "az://exports/focus/daily");
        assert_eq!(folder.locate("a/manifest.json"), "az://exports/focus/daily/a/manifest.json");
        assert_eq!(folder.key_of_uri("az://exports/focus/daily/a/b.csv").as_deref(), Some("a/b.csv"));
        assert_eq!(folder.key_of_uri("az://other/focus/daily/a/b.csv"), None);
        assert_eq!(folder.key_of_uri("az://exports/focus/daily/../x"), None);
        let refused = CloudFolder::connect("az:///prefix", None).err().unwrap();
        assert_eq!(refused.to_string(), "az:///prefix: no container or bucket named");
    }
}
