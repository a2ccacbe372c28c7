//! Phase 5 of a pass, **look** before acting: each due turn's parent chat (does it exist,
//! is it busy, and, for a turn of unknown outcome, is it already in it), each IM channel a
//! forward goes through, each child to stop. Without the lock, in parallel.

use super::*;

/// Looks before acting: at the parent chat for a turn, at the channel for a forward.
pub(super) fn look(client: &impl Server, due: &Due) -> Looked {
    match due {
        Due::Turn(t) => Looked::Turn(TurnEvent::Probed(probe(client, t))),
        // The console is always there (a toast needs no channel of its own).
        Due::Forward(t) if t.chat.channel == "console" => {
            Looked::Turn(TurnEvent::ChannelChecked(turn::Health::Healthy))
        }
        Due::Forward(t) => {
            let c = &t.chat;
            let health = client.channel_health(&c.base_url, &c.agent_id, &c.channel);
            Looked::Turn(TurnEvent::ChannelChecked(chat::health(health)))
        }
        Due::Stop(job) => {
            let event = match stop_child(client, job) {
                Ok(stopped) => Event::StopAnswered {
                    answer: stopped.answer(),
                    agent: stopped.agent,
                    chat_id: stopped.chat_id,
                },
                Err(why) => Event::StopAnswered {
                    agent: None,
                    chat_id: None,
                    answer: match why {
                        StopFailed::OtherChild(why) => StopAnswer::OtherChild(why),
                        why => StopAnswer::Failed(why.message()),
                    },
                },
            };
            Looked::Job(event)
        }
    }
}

/// Looks at the parent chat of a due turn. Before a POST the chat is found by its exact
/// triple, every time: it may have vanished since the last look (posting would start a
/// new one), and QwenPaw's status route calls any id idle, even a deleted chat's. A turn
/// of unknown outcome is looked for in the history of the chat it went to (the id found
/// then); when that chat is gone, in the chat the triple names now (the POST itself may
/// have started it).
fn probe(client: &impl Server, turn: &Turn) -> Probe {
    let c = &turn.chat;
    let (base, agent) = (&c.base_url, &c.agent_id);
    let reading_back = turn.state == TurnState::Unconfirmed;
    if reading_back && let Some(id) = &turn.chat_id {
        match read_back(client, turn, id) {
            Probe::NoChat => {}
            seen => return seen,
        }
    }
    let listed = chat::chats(client.list_chats(base, agent, Some((&c.user_id, &c.channel))));
    let chats = match listed {
        Ok(chats) => chats,
        Err(chat::Unusable::Refused(error)) => return Probe::Refused { error },
        Err(chat::Unusable::Unknown(error)) => return Probe::Unknown { error },
    };
    match chat::find(&chats, &c.session_id, &c.user_id, &c.channel) {
        None => Probe::NoChat,
        Some(found) if !reading_back => Probe::Chat {
            chat_id: found.id.clone(),
            running: found.running,
            archived: found.archived,
        },
        Some(found) if turn.chat_id.as_deref() == Some(found.id.as_str()) => Probe::NoChat,
        Some(found) => read_back(client, turn, &found.id),
    }
}

/// Reads chat `chat_id` back for `turn`'s delivery id.
fn read_back(client: &impl Server, turn: &Turn, chat_id: &str) -> Probe {
    let history = client.chat_history(&turn.chat.base_url, &turn.chat.agent_id, chat_id);
    crate::crash::point("read-back");
    let chat_id = chat_id.to_owned();
    match chat::read_back(history, &turn.turn_id) {
        Ok(ReadBack::Found { turn }) => Probe::Found { chat_id, turn },
        Ok(ReadBack::Absent { running }) => Probe::NotFound { chat_id, running },
        Ok(ReadBack::NoChat) => Probe::NoChat,
        Err(error) => Probe::Unknown { error },
    }
}
