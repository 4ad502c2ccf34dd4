//! The tool sets `relay agent` can ask for (spec §2.9) as the command line and `/role` name them:
//! `worker`, `orchestrator`, `agent_orchestrator`, and `base` (none: the base tools).

use clap::ValueEnum;
use relay_wire::tools::ToolRole;

#[derive(Clone, Copy, ValueEnum)]
pub enum Role {
    #[value(name = "base")]
    Base,
    #[value(name = "worker")]
    Worker,
    #[value(name = "orchestrator")]
    Orchestrator,
    #[value(name = "agent_orchestrator")]
    AgentOrchestrator,
}

impl Role {
    pub fn tool_role(self) -> Option<ToolRole> {
        match self {
            Self::Base => None,
            Self::Worker => Some(ToolRole::Worker),
            Self::Orchestrator => Some(ToolRole::Orchestrator),
            Self::AgentOrchestrator => Some(ToolRole::AgentOrchestrator),
        }
    }
}

/// `worker`, …, or `base` for none.
pub fn role_name(role: Option<ToolRole>) -> &'static str {
    role.map_or("base", relay_client::role_name)
}

/// The role a name means (`base` and `none` are the base set); `Err` for an unknown name.
pub fn parse_role(name: &str) -> Result<Option<ToolRole>, ()> {
    match name {
        "base" | "none" => Ok(None),
        other => Role::from_str(other, true)
            .map(Role::tool_role)
            .map_err(|_| ()),
    }
}
