//! The exporter against real products: Debian's Tomcat 10, ZooKeeper,
//! ActiveMQ and Jetty 9, each in a JVM of its own with a Jolokia agent
//! (1.7.1, Debian's AgentServlet in Jetty through
//! tests/agent/Jolokia1JvmAgent.java, or the 2.6.0 JVM agent from
//! ../shared/jolokia). `jmx_exporter`: jmx_exporter's Java agent
//! (../shared/prometheus) beside it is the oracle for its rules files;
//! `opentelemetry`: upstream's own tests are the oracle for
//! OpenTelemetry's rules files, with real OTLP receivers.
//!
//! This binary covers both agent generations itself, so scripts/test.sh
//! runs it in the 1.7.1 pass only.

#[path = "../common/mod.rs"]
mod common;
mod jmx_exporter;
mod opentelemetry;
mod products;
#[path = "../common/victoria.rs"]
mod victoria;
