package snapshot

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	coreinstall "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/policy"
	policyinstall "k8s.io/kubernetes/pkg/apis/policy/install"
	policyvalidation "k8s.io/kubernetes/pkg/apis/policy/validation"
	resourceinstall "k8s.io/kubernetes/pkg/apis/resource/install"
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"
	schedulinginstall "k8s.io/kubernetes/pkg/apis/scheduling/install"
	schedulingvalidation "k8s.io/kubernetes/pkg/apis/scheduling/validation"
	storageinstall "k8s.io/kubernetes/pkg/apis/storage/install"
	storagevalidation "k8s.io/kubernetes/pkg/apis/storage/validation"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// scheme holds Kubernetes' own defaulting functions and conversions for the
// kinds a snapshot holds, as kube-apiserver registers them.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	coreinstall.Install(s)
	policyinstall.Install(s)
	schedulinginstall.Install(s)
	storageinstall.Install(s)
	resourceinstall.Install(s)
	return s
}()

// admit does to a decoded object what kube-apiserver does to one it is asked
// to create: it fills in the defaults (a container with limits but no
// requests requests its limits; a node without allocatable has its
// capacity; ...) and validates the object with Kubernetes' own validation,
// so that a snapshot means what the same objects would mean in a cluster
// and an object the API server would refuse is refused here. The object is
// defaulted in place. Errors are field errors with their paths.
func admit(obj object) field.ErrorList {
	scheme.Default(obj)
	return check(obj)
}

// check validates a defaulted object; it only reads it.
func check(obj object) field.ErrorList {
	switch o := obj.(type) {
	case *v1.Pod:
		errs := validate(o, func(p *core.Pod) field.ErrorList {
			// Ephemeral containers are added later, through a subresource; a
			// captured pod may have them.
			p.Spec.EphemeralContainers = nil
			return corevalidation.ValidatePodCreate(p, podutil.GetValidationOptionsFromPodSpecAndMeta(&p.Spec, nil, &p.ObjectMeta, nil))
		})
		errs = append(errs, validateOwners(o.ObjectMeta)...)
		return append(errs, validatePodResources(o)...)
	case *v1.Node:
		return append(validate(o, corevalidation.ValidateNode), validateCapacity(o)...)
	case *policyv1.PodDisruptionBudget:
		return validate(o, func(p *policy.PodDisruptionBudget) field.ErrorList {
			errs := corevalidation.ValidateObjectMeta(&p.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
			return append(errs, policyvalidation.ValidatePodDisruptionBudget(p, policyvalidation.PodDisruptionBudgetValidationOptions{})...)
		})
	case *v1.Namespace:
		return validate(o, corevalidation.ValidateNamespace)
	case *schedulingv1.PriorityClass:
		return validate(o, schedulingvalidation.ValidatePriorityClass)
	case *v1.PersistentVolumeClaim:
		return validate(o, func(c *core.PersistentVolumeClaim) field.ErrorList {
			return corevalidation.ValidatePersistentVolumeClaim(c, corevalidation.ValidationOptionsForPersistentVolumeClaim(c, nil))
		})
	case *v1.PersistentVolume:
		return validate(o, func(pv *core.PersistentVolume) field.ErrorList {
			return corevalidation.ValidatePersistentVolume(pv, corevalidation.ValidationOptionsForPersistentVolume(pv, nil))
		})
	case *storagev1.StorageClass:
		return validate(o, storagevalidation.ValidateStorageClass)
	case *storagev1.CSINode:
		return validate(o, storagevalidation.ValidateCSINode)
	case *resourcev1.ResourceClaim:
		return validate(o, resourcevalidation.ValidateResourceClaim)
	case *resourcev1.ResourceClaimTemplate:
		return validate(o, resourcevalidation.ValidateResourceClaimTemplate)
	case *resourcev1.ResourceSlice:
		return validate(o, resourcevalidation.ValidateResourceSlice)
	case *resourcev1.DeviceClass:
		return validate(o, resourcevalidation.ValidateDeviceClass)
	case *metricsv1beta1.NodeMetrics:
		return validateMetrics(o.ObjectMeta, o.Timestamp, o.Window, field.NewPath("usage"), o.Usage)
	case *metricsv1beta1.PodMetrics:
		errs := validateMetrics(o.ObjectMeta, o.Timestamp, o.Window, nil, nil)
		names := map[string]bool{}
		for i, c := range o.Containers {
			path := field.NewPath("containers").Index(i)
			switch {
			case c.Name == "":
				errs = append(errs, field.Required(path.Child("name"), ""))
			case names[c.Name]:
				errs = append(errs, field.Duplicate(path.Child("name"), c.Name))
			}
			names[c.Name] = true
			errs = append(errs, validateUsage(path.Child("usage"), c.Usage)...)
		}
		return errs
	case *PrometheusQuery:
		return validatePrometheusQuery(o)
	}
	return nil
}

// validateMetrics checks what metrics.k8s.io always reports: a name, the
// time of the sample and a non-negative usage.
func validateMetrics(meta metav1.ObjectMeta, at metav1.Time, window metav1.Duration, path *field.Path, usage v1.ResourceList) field.ErrorList {
	errs := corevalidation.ValidateObjectMeta(&meta, meta.Namespace != "", apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if at.IsZero() {
		errs = append(errs, field.Required(field.NewPath("timestamp"), "the time of the sample"))
	}
	if window.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("window"), window.Duration.String(), "must not be negative"))
	}
	if path != nil {
		errs = append(errs, validateUsage(path, usage)...)
	}
	return errs
}

// validateUsage refuses a negative or uncountable usage.
func validateUsage(path *field.Path, usage v1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	for name, q := range usage {
		switch {
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(path.Key(string(name)), q.String(), "must not be negative"))
		case q.AsApproximateFloat64()*1000 >= math.MaxInt64:
			errs = append(errs, field.Invalid(path.Key(string(name)), q.String(), fmt.Sprintf("too large: at most %d", int64(math.MaxInt64/1000))))
		}
	}
	return errs
}

// validate converts obj to its internal type T, which Kubernetes'
// validation takes, and runs check on it.
func validate[T any](obj runtime.Object, check func(*T) field.ErrorList) field.ErrorList {
	var internal T
	if err := scheme.Convert(obj, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return check(&internal)
}

// validateOwners refuses an object that owns itself: its garbage collector
// would never delete it, and no controller recreates it.
func validateOwners(meta metav1.ObjectMeta) field.ErrorList {
	var errs field.ErrorList
	for i, ref := range meta.OwnerReferences {
		if meta.UID != "" && ref.UID == meta.UID {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "ownerReferences").Index(i).Child("uid"), ref.UID, "an object cannot own itself"))
		}
	}
	return errs
}

// validateCapacity refuses node resources the simulation cannot count: a
// quantity whose milli-units overflow int64 (kube-scheduler counts CPU in
// millicores and everything else in int64).
func validateCapacity(n *v1.Node) field.ErrorList {
	var errs field.ErrorList
	for _, part := range []struct {
		name string
		list v1.ResourceList
	}{{"capacity", n.Status.Capacity}, {"allocatable", n.Status.Allocatable}} {
		for name, q := range part.list {
			if q.AsApproximateFloat64()*1000 >= math.MaxInt64 {
				errs = append(errs, field.Invalid(field.NewPath("status", part.name).Key(string(name)), q.String(),
					fmt.Sprintf("too large: at most %d", int64(math.MaxInt64/1000))))
			}
		}
	}
	return errs
}

// validatePodResources refuses pod resources the simulation cannot count,
// as validateCapacity does for nodes: kube-scheduler sums requests in int64
// millicores, so a larger value (cpu: 1e16) wraps around and reads as
// nothing, and the pod would seem to fit an 8-CPU node. That holds for
// what the kubelet reports too: since in-place resize, kube-scheduler
// counts of each container the larger of its spec and its status (the
// resources allocated to it and those it runs with), so a status past
// int64 would make its node look nearly empty. The pod's total is bounded
// too: every container's request may be countable and their sum not.
func validatePodResources(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	check := func(path *field.Path, list v1.ResourceList) {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			if q := list[name]; tooLarge(q.AsApproximateFloat64()) {
				errs = append(errs, field.Invalid(path.Key(string(name)), q.String(), fmt.Sprintf("too large: at most %d", int64(math.MaxInt64/1000))))
			}
		}
	}
	containers := func(path *field.Path, cs []v1.Container) {
		for i, c := range cs {
			at := path.Index(i).Child("resources")
			check(at.Child("requests"), c.Resources.Requests)
			check(at.Child("limits"), c.Resources.Limits)
		}
	}
	containers(field.NewPath("spec", "containers"), pod.Spec.Containers)
	containers(field.NewPath("spec", "initContainers"), pod.Spec.InitContainers)
	check(field.NewPath("spec", "overhead"), pod.Spec.Overhead)
	if pod.Spec.Resources != nil {
		check(field.NewPath("spec", "resources", "requests"), pod.Spec.Resources.Requests)
		check(field.NewPath("spec", "resources", "limits"), pod.Spec.Resources.Limits)
	}
	// What the kubelet reports, by container name (init containers and
	// the others share one name space).
	var reported map[string]*v1.ContainerStatus
	statuses := func(path *field.Path, ss []v1.ContainerStatus) {
		for i := range ss {
			cs, at := &ss[i], path.Index(i)
			check(at.Child("allocatedResources"), cs.AllocatedResources)
			if cs.Resources != nil {
				check(at.Child("resources", "requests"), cs.Resources.Requests)
				check(at.Child("resources", "limits"), cs.Resources.Limits)
			}
			if reported == nil {
				reported = map[string]*v1.ContainerStatus{}
			}
			reported[cs.Name] = cs
		}
	}
	statuses(field.NewPath("status", "containerStatuses"), pod.Status.ContainerStatuses)
	statuses(field.NewPath("status", "initContainerStatuses"), pod.Status.InitContainerStatuses)
	check(field.NewPath("status", "allocatedResources"), pod.Status.AllocatedResources)
	if pod.Status.Resources != nil {
		check(field.NewPath("status", "resources", "requests"), pod.Status.Resources.Requests)
		check(field.NewPath("status", "resources", "limits"), pod.Status.Resources.Limits)
	}
	for i, c := range pod.Status.NodeAllocatableResourceClaimStatuses {
		check(field.NewPath("status", "nodeAllocatableResourceClaimStatuses").Index(i).Child("resources"), c.Resources)
	}
	if len(errs) > 0 {
		return errs
	}
	// Each container counts the larger of its spec and its status.
	total := map[v1.ResourceName]float64{}
	count := func(cs []v1.Container) {
		for i := range cs {
			c := &cs[i]
			st := reported[c.Name]
			if st == nil {
				for name, q := range c.Resources.Requests {
					total[name] += q.AsApproximateFloat64()
				}
				continue
			}
			most := map[v1.ResourceName]float64{}
			for _, list := range []v1.ResourceList{c.Resources.Requests, st.AllocatedResources, resourceRequests(st.Resources)} {
				for name, q := range list {
					most[name] = max(most[name], q.AsApproximateFloat64())
				}
			}
			for name, v := range most {
				total[name] += v
			}
		}
	}
	count(pod.Spec.Containers)
	count(pod.Spec.InitContainers)
	for name, q := range pod.Spec.Overhead {
		total[name] += q.AsApproximateFloat64()
	}
	for _, c := range pod.Status.NodeAllocatableResourceClaimStatuses {
		for name, q := range c.Resources {
			total[name] += q.AsApproximateFloat64()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(total)) {
		if sum := total[name]; tooLarge(sum) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "containers[*]", "resources", "requests").Key(string(name)),
				fmt.Sprintf("%g in all", sum), fmt.Sprintf("too large: the pod's requests sum to more than %d", int64(math.MaxInt64/1000))))
		}
	}
	return errs
}

// resourceRequests is r's requests; nil for nil.
func resourceRequests(r *v1.ResourceRequirements) v1.ResourceList {
	if r == nil {
		return nil
	}
	return r.Requests
}

// tooLarge says whether a quantity's milli-units overflow int64.
func tooLarge(v float64) bool { return v*1000 >= math.MaxInt64 }

// Admit defaults and validates every object of a snapshot built in code
// (a generated or replayed cluster), as Decode does for a file: the
// objects then read as kube-apiserver would have stored them.
func (s *Snapshot) Admit() error {
	return s.AdmitContext(context.Background())
}

// AdmitContext is Admit, which gives up with ctx's cause when ctx ends
// (a large snapshot takes seconds), leaving objects defaulted or not.
func (s *Snapshot) AdmitContext(ctx context.Context) error {
	type admitted struct {
		kind kind
		obj  object
		errs field.ErrorList
	}
	var all []admitted
	for _, k := range kinds {
		for _, o := range k.objects(s, nil) {
			all = append(all, admitted{kind: k, obj: o.(object)})
		}
	}
	// Objects built in code may share parts (one workload's requests), so
	// they are defaulted one after another; validation only reads them,
	// and runs on every core.
	for i, a := range all {
		if i%1024 == 0 && ctx.Err() != nil {
			return context.Cause(ctx)
		}
		scheme.Default(a.obj)
	}
	inParallel(len(all), func(i int) {
		if ctx.Err() != nil {
			return
		}
		all[i].errs = check(all[i].obj)
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	for _, a := range all {
		if len(a.errs) > 0 {
			return fmt.Errorf("%s: %s", ident{kind: a.kind.gvk.Kind, namespace: a.obj.GetNamespace(), name: a.obj.GetName()}, fieldErrors(a.errs))
		}
	}
	return s.CheckDevices()
}

// CheckDevices refuses a state no cluster can be in, that each object
// alone does not show: a device allocated to two ResourceClaims at once
// (see deviceConflicts). The error names the claim, the device and the
// claim that holds it too. Decode checks a file so; a live cluster's state
// is checked so too (package live).
func (s *Snapshot) CheckDevices() error {
	i, errs := deviceConflicts(s.ResourceClaims)
	if len(errs) == 0 {
		return nil
	}
	c := s.ResourceClaims[i]
	return fmt.Errorf("%s: %s", ident{kind: "ResourceClaim", namespace: c.Namespace, name: c.Name}, fieldErrors(errs))
}

// checkDevices is CheckDevices for a decoded file: the error says where
// the claim is in it.
func (b *builder) checkDevices() error {
	i, errs := deviceConflicts(b.s.ResourceClaims)
	if len(errs) == 0 {
		return nil
	}
	c := b.s.ResourceClaims[i]
	return b.seen["ResourceClaim/"+c.Namespace+"/"+c.Name].errorf(ident{kind: "ResourceClaim", namespace: c.Namespace, name: c.Name}, "%s", fieldErrors(errs))
}

// deviceConflicts finds the first claim, in the order given, allocated a
// device (driver/pool/device) that an earlier claim, or an earlier result
// of its own, is allocated too, when the two may not share it: one of them
// holds the device whole (no shareID: kube-scheduler gives a device that
// allows multiple allocations, allowMultipleAllocations, a share of it
// with its own shareID each time). A result with adminAccess allocates
// nothing: kube-scheduler grants it on devices in use. Such a cluster
// cannot be: the scheduler allocates a device whole to one claim at a
// time, and a plan made on it would count one device for two pods. It
// returns the claim's index and an error for each such result; none when
// every device is held once.
func deviceConflicts(claims []*resourcev1.ResourceClaim) (int, field.ErrorList) {
	type holder struct {
		claim, result int
	}
	// whole: the result that holds each device whole; held: the first
	// result that holds it at all.
	whole, held := map[string]holder{}, map[string]holder{}
	for i, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		var errs field.ErrorList
		results := field.NewPath("status", "allocation", "devices", "results")
		for j, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			device := r.Driver + "/" + r.Pool + "/" + r.Device
			alone := r.ShareID == nil
			other, conflict := whole[device]
			if !conflict && alone {
				other, conflict = held[device]
			}
			if conflict {
				by := fmt.Sprintf("ResourceClaim %s/%s (its %s)", claims[other.claim].Namespace, claims[other.claim].Name, results.Index(other.result))
				if other.claim == i {
					by = fmt.Sprintf("this claim's %s", results.Index(other.result))
				}
				errs = append(errs, field.Invalid(results.Index(j), device,
					fmt.Sprintf("the device (driver/pool/device) is allocated to %s too, and one of them holds it whole (no shareID, no adminAccess): kube-scheduler allocates a device whole to one claim at a time", by)))
				continue
			}
			if _, seen := held[device]; !seen {
				held[device] = holder{i, j}
			}
			if alone {
				whole[device] = holder{i, j}
			}
		}
		if len(errs) > 0 {
			return i, errs
		}
	}
	return 0, nil
}
