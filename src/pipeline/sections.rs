//! What the doors and the jobs keep beside the phases, one value of each
//! type: the gateway and its state hold them without knowing them. The
//! composition root (`app`) puts every one in; each door or job reads its
//! own (`doors::DoorSections`, `jobs::JobSections`, the access door's
//! `Elevation`, the OTLP job's `Exports`).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Sections(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl Sections {
    /// These sections and `value`, in place of any other of its type.
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Sections {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
        self
    }

    /// The value of type `T`. The composition root puts every door's and
    /// job's in, so one missing is a gateway built wrongly.
    pub fn get<T: Any + Send + Sync>(&self) -> &T {
        self.0
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref())
            .unwrap_or_else(|| {
                panic!(
                    "no {} among the sections: the composition root (app) puts every one in",
                    std::any::type_name::<T>()
                )
            })
    }
}
