//! `anvil campaign plan`: a campaign file's arm × cell matrix, what the data folder already
//! holds, and the command lines that would record the rest.

use super::args::{CampaignCommand, CampaignPlanArgs};
use crate::app::{AppError, Exit, output, shell_quoted};
use crate::campaign::{CampaignFile, CellState};
use crate::report::table::{Table, TextFormat};

/// One `anvil campaign` subcommand.
pub fn run(command: &CampaignCommand) -> anyhow::Result<Exit> {
    match command {
        CampaignCommand::Plan(args) => plan(args),
    }
}

fn plan(args: &CampaignPlanArgs) -> anyhow::Result<Exit> {
    let (campaign, manifest, plan) =
        CampaignFile::load_checked(&args.file).map_err(|e| AppError::wrap(Exit::BadInput, e))?;
    let cells = campaign.plan(&args.file, &manifest, &plan, &args.out);
    let mut table = Table::new(&["stage", "arm", "cell", "state"]);
    for c in &cells {
        table.row(vec![
            c.stage.clone(),
            c.arm.clone(),
            c.cell_id.clone(),
            c.state.to_string(),
        ]);
    }
    let mut text = format!(
        "campaign {}: {} cells over {} arms, recording into {}\n",
        campaign.campaign_id,
        cells.len(),
        campaign.all_arms().len(),
        args.out.display()
    );
    table.render(TextFormat::Text, &mut text);
    let todo: Vec<_> = cells
        .iter()
        .filter(|c| c.state != CellState::Recorded)
        .collect();
    text.push_str(&format!(
        "\n{} recorded, {} to record\n",
        cells.len() - todo.len(),
        todo.len()
    ));
    for c in todo {
        let shown: Vec<String> = c.command.iter().map(|a| shell_quoted(a)).collect();
        text.push_str(&format!("  {}\n", shown.join(" ")));
    }
    output::stdout(&crate::query::output::printable(&text), "the campaign plan")?;
    Ok(Exit::Ok)
}
