//! Integration tests against the local stack: moto for DynamoDB/SNS/SQS, the market simulator
//! for EC2. Run them with `make test`, which starts and stops the stack.

mod alarms;
mod cli;
mod crash;
mod ec2_contract;
mod events;
mod extend;
mod faults;
mod handlers;
mod handoff;
mod health;
mod market_move;
mod metrics;
mod page;
mod parts;
mod readings;
mod real_market;
mod replay;
mod requests;
mod scan;
mod segments;
mod share;
mod sim_wire;
mod stand_in;
mod store;
mod topics;
mod track;
mod ultraserver;
mod ultraserver_wire;
mod usage;
mod watch;
