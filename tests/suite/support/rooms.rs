//! The rooms MCP server the refusal tests share (tool_refusal, web_console): `book_room` takes
//! dates written YYYY-MM-DD only and refuses others in its own words (an `isError` result);
//! every desk of `reserve_desk` is taken. Served over streamable HTTP; every booking call is
//! kept, accepted or not.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::{Arc, Mutex};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BookArgs {
    /// The room.
    room: String,
    /// The day.
    date: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeskArgs {
    /// The desk.
    desk: String,
}

/// Every `book_room` call made: its room and date.
pub type Bookings = Arc<Mutex<Vec<(String, String)>>>;

#[derive(Clone)]
struct Rooms {
    bookings: Bookings,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Rooms {
    #[tool(description = "Book a room for a day.")]
    async fn book_room(&self, Parameters(a): Parameters<BookArgs>) -> Result<String, String> {
        self.bookings
            .lock()
            .unwrap()
            .push((a.room.clone(), a.date.clone()));
        let iso = a.date.len() == 10
            && a.date.char_indices().all(|(i, c)| {
                if i == 4 || i == 7 {
                    c == '-'
                } else {
                    c.is_ascii_digit()
                }
            });
        if !iso {
            return Err(format!(
                "date must be written as YYYY-MM-DD, not `{}`",
                a.date
            ));
        }
        Ok(format!("booked {} on {}", a.room, a.date))
    }

    #[tool(description = "Reserve a desk.")]
    async fn reserve_desk(&self, Parameters(a): Parameters<DeskArgs>) -> Result<String, String> {
        Err(format!("desk {} is taken until noon", a.desk))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Rooms {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// Serves the rooms server on a free port: its URL, and the bookings it is asked for.
pub async fn serve() -> (String, Bookings) {
    let bookings = Bookings::default();
    let url = super::ledger::serve(Rooms {
        bookings: bookings.clone(),
        tool_router: Rooms::tool_router(),
    })
    .await;
    (url, bookings)
}

/// How many bookings of `room` were asked for.
pub fn asked(bookings: &Bookings, room: &str) -> usize {
    bookings
        .lock()
        .unwrap()
        .iter()
        .filter(|(r, _)| r == room)
        .count()
}
