//! The seam between a tick and the network: [`Server`], the requests the pass makes, one
//! method per request kind, each returning what came back exactly as the client does
//! (`Result<Answer, Transport>`). In production it is the real [`Client`]; the simulation
//! (`tests/sim`) puts a simulated QwenPaw behind it, so the real pass, the real
//! `lifecycle::step` and the real job file run through thousands of random histories
//! with no sockets and no sleeping. Kept thin on purpose: it only forwards, so what the
//! pass sees is what the client saw.

use serde_json::Value;

use super::{Answer, Client, Transport};
use crate::settings::Auth;

/// A QwenPaw server as the pass talks to it (see [`Client`] for each request).
pub trait Server: Sync {
    /// The credentials the requests carry (for the hint a 401 gets).
    fn auth(&self) -> &Auth;
    /// Lets tokens go to `base_url` over plain http (a watch recorded the allowance).
    fn allow_insecure(&mut self, base_url: &str);
    fn get_task(&self, base_url: &str, task_id: &str, agent: &str) -> Result<Answer, Transport>;
    fn list_chats(
        &self,
        base_url: &str,
        agent: &str,
        filter: Option<(&str, &str)>,
    ) -> Result<Answer, Transport>;
    fn chat_status(&self, base_url: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport>;
    fn chat_history(&self, base_url: &str, agent: &str, chat_id: &str)
    -> Result<Answer, Transport>;
    fn post_turn(&self, base_url: &str, agent: &str, body: &Value) -> Result<Answer, Transport>;
    fn send_message(&self, base_url: &str, agent: &str, body: &Value) -> Result<Answer, Transport>;
    fn channel_health(
        &self,
        base_url: &str,
        agent: &str,
        channel: &str,
    ) -> Result<Answer, Transport>;
    fn stop_chat(&self, base_url: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport>;
    fn list_agents(&self, base_url: &str) -> Result<Answer, Transport>;

    /// How many threads (lanes) a parallel phase of `items` requests runs on, given
    /// `--concurrency` `workers`: one per item, at most `workers`.
    fn lanes(&self, workers: usize, items: usize) -> usize {
        workers.clamp(1, items.max(1))
    }
    /// A lane of a parallel phase starts, before its first request, and ends (after its
    /// last, or unwinding). The network needs neither; a server that orders its lanes'
    /// requests does (the simulation runs them one at a time, in an order its seed draws,
    /// so that a history with `--concurrency` above 1 replays from its seed).
    fn lane_started(&self, _lane: usize) {}
    fn lane_ended(&self, _lane: usize) {}
}

impl Server for Client {
    fn auth(&self) -> &Auth {
        Client::auth(self)
    }
    fn allow_insecure(&mut self, base_url: &str) {
        Client::allow_insecure(self, base_url);
    }
    fn get_task(&self, base_url: &str, task_id: &str, agent: &str) -> Result<Answer, Transport> {
        Client::get_task(self, base_url, task_id, agent)
    }
    fn list_chats(
        &self,
        base_url: &str,
        agent: &str,
        filter: Option<(&str, &str)>,
    ) -> Result<Answer, Transport> {
        Client::list_chats(self, base_url, agent, filter)
    }
    fn chat_status(&self, base_url: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        Client::chat_status(self, base_url, agent, chat_id)
    }
    fn chat_history(
        &self,
        base_url: &str,
        agent: &str,
        chat_id: &str,
    ) -> Result<Answer, Transport> {
        Client::chat_history(self, base_url, agent, chat_id)
    }
    fn post_turn(&self, base_url: &str, agent: &str, body: &Value) -> Result<Answer, Transport> {
        Client::post_turn(self, base_url, agent, body)
    }
    fn send_message(&self, base_url: &str, agent: &str, body: &Value) -> Result<Answer, Transport> {
        Client::send_message(self, base_url, agent, body)
    }
    fn channel_health(
        &self,
        base_url: &str,
        agent: &str,
        channel: &str,
    ) -> Result<Answer, Transport> {
        Client::channel_health(self, base_url, agent, channel)
    }
    fn stop_chat(&self, base_url: &str, agent: &str, chat_id: &str) -> Result<Answer, Transport> {
        Client::stop_chat(self, base_url, agent, chat_id)
    }
    fn list_agents(&self, base_url: &str) -> Result<Answer, Transport> {
        Client::list_agents(self, base_url)
    }
}
