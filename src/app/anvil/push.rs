//! `anvil push DIR URL`: upload finished artifacts (and the files beside them) to object
//! storage, run.json last ([`crate::location::push`]).

use super::args::PushArgs;
use crate::app::{AppError, Exit, output};
use crate::location::{Location, block_on, push};

/// `anvil push`: exit 0 when everything was uploaded, 2 otherwise (nothing is uploaded when
/// an artifact is refused).
pub fn run(args: &PushArgs) -> anyhow::Result<Exit> {
    let bad =
        |e: crate::location::LocationError| AppError::wrap(Exit::BadInput, anyhow::Error::new(e));
    let dest = match Location::parse(std::path::Path::new(&args.url)).map_err(bad)? {
        Location::Remote(remote) => remote,
        Location::Local(_) => {
            return Err(AppError::wrap(
                Exit::BadInput,
                anyhow::anyhow!(
                    "{}: not an object-store URL: give s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or \
                     az://CONTAINER/PREFIX (to copy into a folder, use cp -r)",
                    args.url
                ),
            ));
        }
    };
    let started = std::time::Instant::now();
    let pushed = block_on(push(&args.dir, &args.url, &dest)).map_err(bad)?;
    eprintln!(
        "anvil push: {} artifact(s), {} file(s), {:.1} MB in {:.1} s",
        pushed.artifacts,
        pushed.files,
        pushed.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    output::stdout(&format!("{}\n", pushed.url), "the pushed location")?;
    Ok(Exit::Ok)
}
