//! Priority classes sharing the gateway's dispatch slots by weighted fair queuing.

mod deadline;
mod discipline;
mod dispatcher;

pub(crate) use dispatcher::{DispatchSlot, Dispatcher, QueueRefusal};
