//! SQL on a distributed DataFusion engine (datafusion-distributed): the same tables, views
//! and functions, the query planned in the client and its stages run by workers.
//!
//! - [`serve`]: a worker (`anvil worker --listen ADDR`): a gRPC server whose sessions have
//!   anvil's functions registered, and object stores built from each URL it is asked to read
//!   (credentials from the worker's own environment, as for the client).
//! - [`client_context`]: the client's session (`anvil sql --workers URL,...`): its views and
//!   tables are planned here as ever; the physical plan is cut into stages at its shuffles and
//!   each stage's tasks run on the workers. Workers read the artifact files by the paths or
//!   URLs the plan names: on one machine or a shared file system, or from object storage.
//!
//! Counts and order statistics equal the single-process results exactly; floating-point sums
//! may differ in their last bits (the files are split into tasks differently).

use std::net::SocketAddr;
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    DistributedExt, SessionStateBuilderExt, Worker, WorkerQueryContext, WorkerResolver,
};

use super::{QueryError, functional_udf, udf};

/// The workers a client sends its stages to, and how many bytes of Parquet one leaf task
/// reads (the engine's default, 16 MiB, keeps a small query in the client).
#[derive(Debug, Clone)]
pub struct Workers {
    pub urls: Vec<url::Url>,
    pub bytes_per_task: usize,
}

/// The engine's default bytes of Parquet per leaf task.
pub const DEFAULT_BYTES_PER_TASK: usize = 16 << 20;

impl Workers {
    /// `http://host:port` URLs, as `--workers` gives them.
    pub fn parse(urls: &[String], bytes_per_task: usize) -> Result<Workers, String> {
        let urls = urls
            .iter()
            .map(|u| {
                url::Url::parse(u)
                    .ok()
                    .filter(|p| p.scheme() == "http" && p.host().is_some())
                    .ok_or_else(|| format!("--workers {u}: expected http://HOST:PORT"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if urls.is_empty() {
            return Err("--workers: give at least one worker URL".to_owned());
        }
        Ok(Workers {
            urls,
            bytes_per_task: bytes_per_task.max(1),
        })
    }

    /// Refuse up front when a worker does not accept a connection (within 5 s each), naming
    /// it and how to start one, instead of failing in the middle of a query.
    pub async fn check_reachable(&self) -> Result<(), String> {
        for url in &self.urls {
            let (host, port) = (
                url.host_str().unwrap_or_default(),
                url.port_or_known_default().unwrap_or(80),
            );
            let connect = tokio::net::TcpStream::connect((host, port));
            let problem =
                match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "no answer within 5 s".to_owned(),
                };
            return Err(format!(
                "--workers {url}: no worker answers ({problem}); start one there with `anvil worker --listen {host}:{port}` or leave it out"
            ));
        }
        Ok(())
    }
}

#[derive(Clone)]
struct Fixed(Vec<url::Url>);

impl WorkerResolver for Fixed {
    fn get_urls(&self) -> Result<Vec<url::Url>, DataFusionError> {
        Ok(self.0.clone())
    }
}

/// The client's session: `config`, the distributed planner over `workers`.
pub fn client_context(
    config: SessionConfig,
    workers: &Workers,
) -> Result<SessionContext, QueryError> {
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_distributed_worker_resolver(Fixed(workers.urls.clone()))
        .with_distributed_planner()
        .with_distributed_file_scan_config_bytes_per_partition(workers.bytes_per_task)
        .map_err(QueryError::DataFusion)?
        .build();
    Ok(SessionContext::new_with_state(state))
}

/// Serve as a worker on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener) -> Result<(), String> {
    let runtime = RuntimeEnvBuilder::new()
        .build_arc()
        .map_err(|e| format!("the worker's runtime: {e}"))?;
    #[cfg(feature = "object-store")]
    let runtime = {
        let mut env = (*runtime).clone();
        env.object_store_registry = Arc::new(EnvStores::default());
        Arc::new(env)
    };
    let worker = Worker::from_session_builder(|ctx: WorkerQueryContext| async move {
        let session = SessionContext::new_with_state(ctx.builder.build());
        udf::register(&session);
        functional_udf::register(&session);
        Ok(session.state())
    })
    .with_runtime_env(runtime);
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tonic::transport::Server::builder()
        .add_service(worker.into_worker_server())
        .serve_with_incoming(incoming)
        .await
        .map_err(|e| format!("the worker's server: {e}"))
}

/// Where a worker listens: `ADDR` as `--listen` gives it.
pub async fn bind(listen: &str) -> Result<(tokio::net::TcpListener, SocketAddr), String> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("--listen {listen}: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("--listen {listen}: {e}"))?;
    Ok((listener, addr))
}

/// A worker's object stores: the local file system, and a store for each bucket a plan names,
/// built from the URL and the worker's environment as the client builds its own
/// ([`crate::location::Remote::open`]).
#[cfg(feature = "object-store")]
#[derive(Debug, Default)]
struct EnvStores {
    local: datafusion::execution::object_store::DefaultObjectStoreRegistry,
    built: std::sync::Mutex<std::collections::HashMap<String, Arc<dyn object_store::ObjectStore>>>,
}

#[cfg(feature = "object-store")]
impl datafusion::execution::object_store::ObjectStoreRegistry for EnvStores {
    fn register_store(
        &self,
        url: &url::Url,
        store: Arc<dyn object_store::ObjectStore>,
    ) -> Option<Arc<dyn object_store::ObjectStore>> {
        self.local.register_store(url, store)
    }

    fn get_store(
        &self,
        url: &url::Url,
    ) -> datafusion::error::Result<Arc<dyn object_store::ObjectStore>> {
        if let Ok(store) = self.local.get_store(url) {
            return Ok(store);
        }
        let key = format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default());
        let mut built = self.built.lock().map_err(|_| {
            DataFusionError::Internal("the worker's store registry was poisoned".into())
        })?;
        if let Some(store) = built.get(&key) {
            return Ok(store.clone());
        }
        let remote = crate::location::Remote::open(&key)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let store = remote.store().clone();
        built.insert(key, store.clone());
        Ok(store)
    }
}
